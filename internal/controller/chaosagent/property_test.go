package chaosagent

import (
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/ownership"
)

// The vocabularies random worlds are drawn from: small, so that generated
// objects often collide with selectors, exclusions and protections.
var (
	genNamespaces = []string{"apps", "team-a", "team-b", "prod-eu", "kube-system", "crossplane-system"}
	genLabelKeys  = []string{"app", "tier", "chaos.clusterops.io/victim", "workload.clusterops.io/appbundle", LabelBackupOf, ownership.LabelManagedBy}
	genLabelVals  = []string{"web", "db", "true", ownership.ManagedBy}
	genOwners     = []string{"apps/v1", "workload.clusterops.io/v1alpha1", "chaos.clusterops.io/v1alpha1", "clusterops.io/v1alpha1", "v1"}
	genCMNames    = []string{"app-config", "kube-root-ca.crt", "settings", "feature-flags"}
)

func pick[T any](r *rand.Rand, from []T) T { return from[r.IntN(len(from))] }

func genObject(r *rand.Rand, name string) Object {
	o := Object{Namespace: pick(r, genNamespaces), Name: name, Labels: map[string]string{}}
	for range r.IntN(3) {
		o.Labels[pick(r, genLabelKeys)] = pick(r, genLabelVals)
	}
	if r.IntN(8) == 0 {
		o.Owners = []metav1.OwnerReference{{APIVersion: pick(r, genOwners), Kind: "X", Name: "owner"}}
	}
	return o
}

func genSelector(r *rand.Rand) labels.Selector {
	switch r.IntN(4) {
	case 0, 1:
		return labels.Everything()
	case 2:
		return labels.SelectorFromSet(labels.Set{pick(r, genLabelKeys): pick(r, genLabelVals)})
	}
	sel, _ := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: pick(r, genLabelKeys), Operator: metav1.LabelSelectorOpNotIn, Values: []string{pick(r, genLabelVals)},
	}}})
	return sel
}

func genCase(r *rand.Rand) (Spec, World) {
	s := Spec{
		Tantrum: r.IntN(2) == 0, Cancer: r.IntN(2) == 0, Ipsum: r.IntN(2) == 0,
		PodTolerance: r.IntN(4), MaxReplicas: int32(1 + r.IntN(20)), Eagerness: 1 + r.IntN(100),
		MaxActions: 1 + r.IntN(8), MinPodAge: time.Duration(r.IntN(3)) * 30 * time.Minute, Evict: r.IntN(2) == 0,
		PodSelector: genSelector(r), DeploymentSelector: genSelector(r), ConfigMapSelector: genSelector(r),
	}
	for range r.IntN(2) {
		s.Excluded = append(s.Excluded, pick(r, []string{"prod-*", "team-?", "apps", "kube-*"}))
	}
	w := World{Now: now, ProviderNamespace: "crossplane-system"}
	for _, ns := range genNamespaces {
		if r.IntN(4) != 0 {
			w.Namespaces = append(w.Namespaces, ns)
		}
	}
	for i := range r.IntN(25) {
		p := Pod{Object: genObject(r, fmt.Sprintf("pod-%d", i)), Created: now.Add(-time.Duration(r.IntN(120)) * time.Minute),
			Phase: pick(r, []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed}), Terminating: r.IntN(6) == 0}
		w.Pods = append(w.Pods, p)
	}
	for i := range r.IntN(8) {
		w.Deployments = append(w.Deployments, Deployment{Object: genObject(r, fmt.Sprintf("deploy-%d", i)), Replicas: int32(r.IntN(25))})
	}
	for i := range r.IntN(8) {
		name := pick(r, genCMNames)
		if r.IntN(2) == 0 {
			name = fmt.Sprintf("cm-%d", i)
		}
		c := ConfigMap{Object: genObject(r, name), Immutable: r.IntN(4) == 0, Keys: r.IntN(3)}
		// The API never lists two objects of one name in one namespace.
		if !slices.ContainsFunc(w.ConfigMaps, func(o ConfigMap) bool { return o.Namespace == c.Namespace && o.Name == c.Name }) {
			w.ConfigMaps = append(w.ConfigMaps, c)
		}
	}
	return s, w
}

// TestChooseNeverLeavesTheAllowedSet generates 20,000 random specs and worlds
// and checks every planned action against the rules, restated here
// independently of Choose's own filters.
func TestChooseNeverLeavesTheAllowedSet(t *testing.T) {
	const n = 20000
	gen := rand.New(rand.NewPCG(42, 4242))
	actions := 0
	for i := range n {
		s, w := genCase(gen)
		choice := Choose(s, w, rand.New(rand.NewPCG(uint64(i), 1)))
		if len(choice.Actions) > s.MaxActions {
			t.Fatalf("case %d: %d actions, more than maxActionsPerRound %d", i, len(choice.Actions), s.MaxActions)
		}
		seen := map[string]bool{}
		pods := 0
		for _, a := range choice.Actions {
			actions++
			id := a.Kind + "/" + a.Namespace + "/" + a.Name
			if seen[id] {
				t.Fatalf("case %d: %s planned twice in one round", i, id)
			}
			seen[id] = true
			if !slices.Contains(w.Namespaces, a.Namespace) || a.Namespace == w.ProviderNamespace {
				t.Fatalf("case %d: %s is outside the allowed namespaces %v", i, id, w.Namespaces)
			}
			for _, p := range s.Excluded {
				if ok, _ := path.Match(p, a.Namespace); ok {
					t.Fatalf("case %d: %s is in a namespace excluded by %q", i, id, p)
				}
			}
			switch a.Kind {
			case v1alpha1.ActionEvictPod, v1alpha1.ActionDeletePod:
				pods++
				checkPod(t, i, s, w, a, pods)
			case v1alpha1.ActionScaleDeployment:
				checkDeployment(t, i, s, w, a)
			case v1alpha1.ActionRewriteConfigMap:
				checkConfigMap(t, i, s, w, a)
			default:
				t.Fatalf("case %d: unknown action %q", i, a.Kind)
			}
		}
	}
	// Guards against a generator so strict that nothing is ever tested.
	if actions < n/4 {
		t.Fatalf("only %d actions in %d cases: the generator rarely produces candidates", actions, n)
	}
}

func provided(o Object) bool {
	for _, ref := range o.Owners {
		if ref.APIVersion != "apps/v1" && ref.APIVersion != "v1" {
			return true
		}
	}
	for k, v := range o.Labels {
		if k == "workload.clusterops.io/appbundle" || k == LabelBackupOf || (k == ownership.LabelManagedBy && v == ownership.ManagedBy) {
			return true
		}
	}
	return false
}

func checkPod(t *testing.T, i int, s Spec, w World, a Action, killed int) {
	t.Helper()
	if !s.Tantrum {
		t.Fatalf("case %d: pod %s/%s killed with tantrumMode off", i, a.Namespace, a.Name)
	}
	candidates := 0
	var p *Pod
	for j := range w.Pods {
		q := &w.Pods[j]
		if q.Namespace == a.Namespace && q.Name == a.Name {
			p = q
		}
	}
	if p == nil {
		t.Fatalf("case %d: pod %s/%s does not exist", i, a.Namespace, a.Name)
	}
	if provided(p.Object) || !s.PodSelector.Matches(labels.Set(p.Labels)) || now.Sub(p.Created) < s.MinPodAge ||
		p.Terminating || p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
		t.Fatalf("case %d: pod %+v is no candidate but was killed", i, *p)
	}
	for _, q := range w.Pods {
		if slices.Contains(w.Namespaces, q.Namespace) && q.Namespace != w.ProviderNamespace && !excluded(s.Excluded, q.Namespace) &&
			!provided(q.Object) && s.PodSelector.Matches(labels.Set(q.Labels)) && now.Sub(q.Created) >= s.MinPodAge &&
			!q.Terminating && q.Phase != corev1.PodSucceeded && q.Phase != corev1.PodFailed {
			candidates++
		}
	}
	// Before the k-th kill, candidates-(k-1) remained: that must not be below the tolerance.
	if remaining := candidates - (killed - 1); remaining < s.PodTolerance {
		t.Fatalf("case %d: kill %d with %d candidates left, below podTolerance %d", i, killed, remaining, s.PodTolerance)
	}
	if want := map[bool]string{true: v1alpha1.ActionEvictPod, false: v1alpha1.ActionDeletePod}[s.Evict]; a.Kind != want {
		t.Fatalf("case %d: %s with respectDisruptionBudgets=%t", i, a.Kind, s.Evict)
	}
}

func checkDeployment(t *testing.T, i int, s Spec, w World, a Action) {
	t.Helper()
	for _, d := range w.Deployments {
		if d.Namespace != a.Namespace || d.Name != a.Name {
			continue
		}
		if !s.Cancer || provided(d.Object) || !s.DeploymentSelector.Matches(labels.Set(d.Labels)) {
			t.Fatalf("case %d: Deployment %+v is no candidate but was scaled", i, d)
		}
		if a.FromReplicas != d.Replicas || a.ToReplicas > s.MaxReplicas || a.ToReplicas <= a.FromReplicas || a.ToReplicas > 2*a.FromReplicas {
			t.Fatalf("case %d: Deployment %s/%s scaled %d -> %d with maxReplicas %d", i, a.Namespace, a.Name, a.FromReplicas, a.ToReplicas, s.MaxReplicas)
		}
		return
	}
	t.Fatalf("case %d: Deployment %s/%s does not exist", i, a.Namespace, a.Name)
}

func checkConfigMap(t *testing.T, i int, s Spec, w World, a Action) {
	t.Helper()
	for _, c := range w.ConfigMaps {
		if c.Namespace != a.Namespace || c.Name != a.Name {
			continue
		}
		if !s.Ipsum || provided(c.Object) || !s.ConfigMapSelector.Matches(labels.Set(c.Labels)) || c.Immutable || c.Name == "kube-root-ca.crt" || c.Keys == 0 {
			t.Fatalf("case %d: ConfigMap %+v is no candidate but was rewritten", i, c)
		}
		return
	}
	t.Fatalf("case %d: ConfigMap %s/%s does not exist", i, a.Namespace, a.Name)
}
