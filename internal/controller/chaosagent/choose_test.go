package chaosagent

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

var now = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC) // a Monday

func spec(mod func(*Spec)) Spec {
	s := Spec{
		Eagerness: 100, MaxActions: 1, MaxReplicas: 128, Interval: time.Minute, Evict: true,
		PodSelector: labels.Everything(), DeploymentSelector: labels.Everything(), ConfigMapSelector: labels.Everything(),
	}
	mod(&s)
	return s
}

func pod(ns, name string, age time.Duration) Pod {
	return Pod{Object: Object{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}, Created: now.Add(-age), Phase: corev1.PodRunning}
}

func pods(ns string, n int) []Pod {
	out := make([]Pod, n)
	for i := range n {
		out[i] = pod(ns, string(rune('a'+i)), time.Hour)
	}
	return out
}

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

func TestChooseKeepsEachActionWithinItsLimits(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   Spec
		world  World
		seed   uint64
		want   Choice
	}{
		"BelowTolerance": {
			reason: "Fewer candidate pods than podTolerance: no kill, and the plan says why.",
			spec:   spec(func(s *Spec) { s.Tantrum, s.PodTolerance = true, 10 }),
			world:  World{Namespaces: []string{"apps"}, Pods: pods("apps", 9), Now: now},
			want:   Choice{Reasons: []string{"tantrum: 9 candidate pods, below podTolerance 10"}},
		},
		"AtTolerance": {
			reason: "As many candidates as podTolerance: one is evicted.",
			spec:   spec(func(s *Spec) { s.Tantrum, s.PodTolerance = true, 1 }),
			world:  World{Namespaces: []string{"apps"}, Pods: pods("apps", 1), Now: now},
			want:   Choice{Actions: []Action{{Kind: v1alpha1.ActionEvictPod, Namespace: "apps", Name: "a", UID: "uid-a"}}},
		},
		"DeleteWithoutBudgets": {
			reason: "With respectDisruptionBudgets off pods are deleted, not evicted.",
			spec:   spec(func(s *Spec) { s.Tantrum, s.Evict = true, false }),
			world:  World{Namespaces: []string{"apps"}, Pods: pods("apps", 1), Now: now},
			want:   Choice{Actions: []Action{{Kind: v1alpha1.ActionDeletePod, Namespace: "apps", Name: "a", UID: "uid-a"}}},
		},
		"NoCandidates": {
			reason: "Every mode without candidates says so.",
			spec:   spec(func(s *Spec) { s.Tantrum, s.Cancer, s.Ipsum = true, true, true }),
			world:  World{Namespaces: []string{"apps"}, Now: now},
			want: Choice{Reasons: []string{
				"tantrum: no candidate pods", "cancer: no candidate Deployments (with 1 to 127 replicas)", "ipsum: no candidate ConfigMaps",
			}},
		},
		"YoungPodsSpared": {
			reason: "Pods younger than minPodAge are no candidates.",
			spec:   spec(func(s *Spec) { s.Tantrum, s.MinPodAge = true, 10*time.Minute }),
			world:  World{Namespaces: []string{"apps"}, Pods: []Pod{pod("apps", "young", time.Minute)}, Now: now},
			want:   Choice{Reasons: []string{"tantrum: no candidate pods"}},
		},
		"ProviderPodsSpared": {
			reason: "Pods of the provider's kinds, or in its namespace, are never candidates.",
			spec:   spec(func(s *Spec) { s.Tantrum = true }),
			world: World{Namespaces: []string{"apps", "crossplane-system"}, ProviderNamespace: "crossplane-system", Now: now, Pods: []Pod{
				{Object: Object{Namespace: "apps", Name: "immortal", Labels: map[string]string{"workload.clusterops.io/immortalcontainer": "x"}}, Created: now.Add(-time.Hour)},
				{Object: Object{Namespace: "apps", Name: "owned", Owners: []metav1.OwnerReference{{APIVersion: "workload.clusterops.io/v1alpha1", Kind: "AppBundle", Name: "b"}}}, Created: now.Add(-time.Hour)},
				pod("crossplane-system", "provider", time.Hour),
			}},
			want: Choice{Reasons: []string{"tantrum: no candidate pods"}},
		},
		"EagernessRollMissed": {
			reason: "An eagerness of 1% misses with this seed, and the plan says so.",
			spec:   spec(func(s *Spec) { s.Tantrum, s.Eagerness = true, 1 }),
			world:  World{Namespaces: []string{"apps"}, Pods: pods("apps", 3), Now: now},
			seed:   7,
			want:   Choice{Reasons: []string{"eagerness roll: 1 of 1 rolls missed (eagerness 1%)"}},
		},
		"DoublingCapped": {
			reason: "Doubling stops at maxReplicas; Deployments at the cap or at zero are no candidates.",
			spec:   spec(func(s *Spec) { s.Cancer, s.MaxReplicas, s.MaxActions = true, 5, 5 }),
			world: World{Namespaces: []string{"apps"}, Now: now, Deployments: []Deployment{
				{Object: Object{Namespace: "apps", Name: "three"}, Replicas: 3},
				{Object: Object{Namespace: "apps", Name: "capped"}, Replicas: 5},
				{Object: Object{Namespace: "apps", Name: "stopped"}, Replicas: 0},
			}},
			want: Choice{Actions: []Action{{Kind: v1alpha1.ActionScaleDeployment, Namespace: "apps", Name: "three", FromReplicas: 3, ToReplicas: 5}}},
		},
		"IpsumSkipsProtectedConfigMaps": {
			reason: "Immutable, kube-root-ca.crt, provider-owned and empty ConfigMaps are never candidates.",
			spec:   spec(func(s *Spec) { s.Ipsum, s.MaxActions = true, 10 }),
			world: World{Namespaces: []string{"apps"}, Now: now, ConfigMaps: []ConfigMap{
				{Object: Object{Namespace: "apps", Name: "frozen"}, Immutable: true, Keys: 1},
				{Object: Object{Namespace: "apps", Name: "kube-root-ca.crt"}, Keys: 1},
				{Object: Object{Namespace: "apps", Name: "copied", Labels: map[string]string{"copy.clusterops.io/rule": "r"}}, Keys: 1},
				{Object: Object{Namespace: "apps", Name: "backup", Labels: map[string]string{LabelBackupOf: "agent"}}, Keys: 1},
				{Object: Object{Namespace: "apps", Name: "empty"}},
				{Object: Object{Namespace: "apps", Name: "app-config", Labels: map[string]string{"chaos.clusterops.io/victim": "true"}}, Keys: 2},
			}},
			want: Choice{Actions: []Action{{Kind: v1alpha1.ActionRewriteConfigMap, Namespace: "apps", Name: "app-config"}}},
		},
		"ExcludedNamespace": {
			reason: "Excluded namespaces are never acted in, even when allowed.",
			spec:   spec(func(s *Spec) { s.Tantrum, s.Excluded = true, []string{"prod-*"} }),
			world:  World{Namespaces: []string{"prod-eu"}, Pods: pods("prod-eu", 3), Now: now},
			want:   Choice{Reasons: []string{"no namespace to act in"}},
		},
		"OutsideAllowedNamespaces": {
			reason: "Objects listed outside the allowed namespaces are never candidates.",
			spec:   spec(func(s *Spec) { s.Tantrum = true }),
			world:  World{Namespaces: []string{"apps"}, Pods: pods("other", 3), Now: now},
			want:   Choice{Reasons: []string{"tantrum: no candidate pods"}},
		},
		"QuietWindow": {
			reason: "Inside a quiet window nothing is planned.",
			spec: spec(func(s *Spec) {
				s.Tantrum = true
				s.Windows = []Window{{Start: 11 * 60, End: 13 * 60, Loc: time.UTC}}
			}),
			world: World{Namespaces: []string{"apps"}, Pods: pods("apps", 3), Now: now},
			want:  Choice{Reasons: []string{"quiet window until 2026-03-02T13:00:00Z"}},
		},
		"SelectorNarrows": {
			reason: "Only pods the podSelector matches are candidates.",
			spec: spec(func(s *Spec) {
				s.Tantrum, s.MaxActions = true, 5
				s.PodSelector = labels.SelectorFromSet(labels.Set{"chaos": "yes"})
			}),
			world: World{Namespaces: []string{"apps"}, Now: now, Pods: append(pods("apps", 3),
				Pod{Object: Object{Namespace: "apps", Name: "victim", Labels: map[string]string{"chaos": "yes"}}, Created: now.Add(-time.Hour), Phase: corev1.PodRunning})},
			want: Choice{Actions: []Action{{Kind: v1alpha1.ActionEvictPod, Namespace: "apps", Name: "victim"}}},
		},
		"ToleranceHoldsWithinRound": {
			reason: "Kills within one round stop once fewer than podTolerance candidates remain.",
			spec:   spec(func(s *Spec) { s.Tantrum, s.PodTolerance, s.MaxActions = true, 2, 5 }),
			world:  World{Namespaces: []string{"apps"}, Pods: pods("apps", 3), Now: now},
			seed:   1,
			want: Choice{Actions: []Action{
				{Kind: v1alpha1.ActionEvictPod, Namespace: "apps", Name: "c", UID: "uid-c"},
				{Kind: v1alpha1.ActionEvictPod, Namespace: "apps", Name: "a", UID: "uid-a"},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Choose(tc.spec, tc.world, seeded(tc.seed))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestChooseRepeatsItselfForASeed: the same seed and state give the same choice, whatever
// order the API listed the objects in.
func TestChooseRepeatsItselfForASeed(t *testing.T) {
	s := spec(func(s *Spec) { s.Tantrum, s.Cancer, s.Ipsum, s.MaxActions, s.Eagerness = true, true, true, 4, 60 })
	w := World{Namespaces: []string{"a", "b"}, Now: now, Pods: append(pods("a", 5), pods("b", 5)...)}
	for i := range 5 {
		w.Deployments = append(w.Deployments, Deployment{Object: Object{Namespace: "b", Name: string(rune('p' + i))}, Replicas: int32(i + 1)})
		w.ConfigMaps = append(w.ConfigMaps, ConfigMap{Object: Object{Namespace: "a", Name: string(rune('k' + i))}, Keys: 1})
	}
	reversed := w
	reversed.Pods = nil
	for i := len(w.Pods) - 1; i >= 0; i-- {
		reversed.Pods = append(reversed.Pods, w.Pods[i])
	}
	for seed := range uint64(50) {
		a, b := Choose(s, w, seeded(seed)), Choose(s, reversed, seeded(seed))
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("seed %d: choices differ with the listing order: -first, +second:\n%s", seed, diff)
		}
	}
}

func TestDoubledNeverPassesTheCap(t *testing.T) {
	cases := map[string]struct {
		reason   string
		n, limit int32
		want     int32
	}{
		"Doubles":   {reason: "Below half the cap, replicas double.", n: 3, limit: 128, want: 6},
		"Capped":    {reason: "Above half the cap, the cap.", n: 100, limit: 128, want: 128},
		"HalfOfCap": {reason: "Exactly half doubles to the cap.", n: 64, limit: 128, want: 128},
		"OddCap":    {reason: "An odd cap is never exceeded.", n: 3, limit: 5, want: 5},
		"NoOverflow": {
			reason: "Huge counts do not overflow.", n: 1<<31 - 1, limit: 1<<31 - 1, want: 1<<31 - 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Doubled(tc.n, tc.limit); got != tc.want {
				t.Errorf("\n%s\nDoubled(%d, %d) = %d, want %d", tc.reason, tc.n, tc.limit, got, tc.want)
			}
		})
	}
}
