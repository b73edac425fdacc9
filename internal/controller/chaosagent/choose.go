package chaosagent

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/ownership"
)

// rootCAConfigMap is published into every namespace by kube-controller-manager.
const rootCAConfigMap = "kube-root-ca.crt"

// An Object is what Choose needs to know of any candidate.
type Object struct {
	Namespace, Name string
	UID             types.UID
	Labels          map[string]string
	Owners          []metav1.OwnerReference
}

// A Pod is a candidate for a tantrum.
type Pod struct {
	Object
	Created     time.Time
	Phase       corev1.PodPhase
	Terminating bool
}

// A Deployment is a candidate for cancerMode.
type Deployment struct {
	Object
	Replicas int32
}

// A ConfigMap is a candidate for ipsumMode.
type ConfigMap struct {
	Object
	Immutable bool
	Keys      int
}

// A World is the cluster state a round decides on.
type World struct {
	// Namespaces the round may act in: in reach and targeted.
	Namespaces []string
	// ProviderNamespace is never acted in, whatever else says so.
	ProviderNamespace string

	Pods        []Pod
	Deployments []Deployment
	ConfigMaps  []ConfigMap

	Now time.Time
}

// An Action is one planned change.
type Action struct {
	Kind            string // one of the v1alpha1.Action* constants
	Namespace, Name string
	UID             types.UID
	// FromReplicas and ToReplicas are set for ScaleDeployment.
	FromReplicas, ToReplicas int32
}

// A Choice is what a round does, and why it does no more.
type Choice struct {
	Actions []Action
	// Reasons say why candidates were passed over or nothing happened.
	Reasons []string
}

type mode int

const (
	modeTantrum mode = iota
	modeCancer
	modeIpsum
)

// Choose picks a round's actions: at most s.MaxActions, each rolled against
// s.Eagerness, each on a different object chosen at random among the
// candidates of a randomly chosen enabled mode. It never chooses an action
// outside w.Namespaces, in the provider's or an excluded namespace, on an
// object the selectors do not match or the provider owns, on an immutable or
// system ConfigMap, or on a pod younger than s.MinPodAge; and never kills a pod
// while fewer than s.PodTolerance candidates remain. The same s, w and random
// source give the same choice.
func Choose(s Spec, w World, r *rand.Rand) Choice {
	p := Choice{}
	if quiet, until := Quiet(s.Windows, w.Now); quiet {
		p.Reasons = append(p.Reasons, "quiet window until "+until.UTC().Format(time.RFC3339))
		return p
	}
	allowed := map[string]bool{}
	for _, ns := range w.Namespaces {
		if ns != "" && ns != w.ProviderNamespace && !excluded(s.Excluded, ns) {
			allowed[ns] = true
		}
	}
	if len(allowed) == 0 {
		p.Reasons = append(p.Reasons, "no namespace to act in")
		return p
	}
	pools := map[mode][]Action{}
	if s.Tantrum {
		pools[modeTantrum] = podCandidates(s, w, allowed)
		switch n := len(pools[modeTantrum]); {
		case n == 0:
			p.Reasons = append(p.Reasons, "tantrum: no candidate pods")
		case n < s.PodTolerance:
			p.Reasons = append(p.Reasons, fmt.Sprintf("tantrum: %d candidate pods, below podTolerance %d", n, s.PodTolerance))
		}
	}
	if s.Cancer {
		if pools[modeCancer] = deploymentCandidates(s, w, allowed); len(pools[modeCancer]) == 0 {
			p.Reasons = append(p.Reasons, fmt.Sprintf("cancer: no candidate Deployments (with 1 to %d replicas)", s.MaxReplicas-1))
		}
	}
	if s.Ipsum {
		if pools[modeIpsum] = configMapCandidates(s, w, allowed); len(pools[modeIpsum]) == 0 {
			p.Reasons = append(p.Reasons, "ipsum: no candidate ConfigMaps")
		}
	}

	missed := 0
	for range s.MaxActions {
		modes := available(s, pools)
		if len(modes) == 0 {
			break
		}
		if r.IntN(100) >= s.Eagerness {
			missed++
			continue
		}
		m := modes[r.IntN(len(modes))]
		i := r.IntN(len(pools[m]))
		p.Actions = append(p.Actions, pools[m][i])
		pools[m] = slices.Delete(pools[m], i, i+1)
	}
	if missed > 0 {
		p.Reasons = append(p.Reasons, fmt.Sprintf("eagerness roll: %d of %d rolls missed (eagerness %d%%)", missed, missed+len(p.Actions), s.Eagerness))
	}
	return p
}

// available lists the modes that may still act, in a fixed order.
func available(s Spec, pools map[mode][]Action) []mode {
	var out []mode
	for _, m := range []mode{modeTantrum, modeCancer, modeIpsum} {
		n := len(pools[m])
		if n == 0 || (m == modeTantrum && n < s.PodTolerance) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func podCandidates(s Spec, w World, allowed map[string]bool) []Action {
	var out []Action
	for _, p := range w.Pods {
		if !eligible(p.Object, allowed, s.PodSelector) || p.Terminating ||
			p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed || w.Now.Sub(p.Created) < s.MinPodAge {
			continue
		}
		kind := v1alpha1.ActionDeletePod
		if s.Evict {
			kind = v1alpha1.ActionEvictPod
		}
		out = append(out, Action{Kind: kind, Namespace: p.Namespace, Name: p.Name, UID: p.UID})
	}
	return sorted(out)
}

func deploymentCandidates(s Spec, w World, allowed map[string]bool) []Action {
	var out []Action
	for _, d := range w.Deployments {
		if !eligible(d.Object, allowed, s.DeploymentSelector) || d.Replicas < 1 || d.Replicas >= s.MaxReplicas {
			continue
		}
		out = append(out, Action{
			Kind: v1alpha1.ActionScaleDeployment, Namespace: d.Namespace, Name: d.Name, UID: d.UID,
			FromReplicas: d.Replicas, ToReplicas: Doubled(d.Replicas, s.MaxReplicas),
		})
	}
	return sorted(out)
}

func configMapCandidates(s Spec, w World, allowed map[string]bool) []Action {
	var out []Action
	for _, c := range w.ConfigMaps {
		if !eligible(c.Object, allowed, s.ConfigMapSelector) || c.Immutable || c.Name == rootCAConfigMap || c.Keys == 0 {
			continue
		}
		out = append(out, Action{Kind: v1alpha1.ActionRewriteConfigMap, Namespace: c.Namespace, Name: c.Name, UID: c.UID})
	}
	return sorted(out)
}

// Doubled is twice n, capped at maxReplicas.
func Doubled(n, maxReplicas int32) int32 {
	if n > maxReplicas/2 {
		return maxReplicas
	}
	return n * 2
}

func eligible(o Object, allowed map[string]bool, sel labels.Selector) bool {
	return allowed[o.Namespace] && (sel == nil || sel.Matches(labels.Set(o.Labels))) && !ProviderOwned(o)
}

// sorted orders candidates by namespace and name, so that the random choices
// depend on the cluster state and not on the order the API listed it in.
func sorted(as []Action) []Action {
	slices.SortFunc(as, func(a, b Action) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return as
}

// excluded reports whether ns matches one of the names or glob patterns.
func excluded(patterns []string, ns string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, ns); err == nil && ok {
			return true
		}
	}
	return false
}

// ProviderOwned reports whether an object belongs to this provider: owned by
// one of its kinds, or labelled by one (a label key under clusterops.io, other
// than the chaos.clusterops.io keys users may opt objects in with), or marked
// as managed by it. The agent never touches those.
func ProviderOwned(o Object) bool {
	for _, ref := range o.Owners {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && clusteropsGroup(gv.Group) {
			return true
		}
	}
	for k, v := range o.Labels {
		if k == ownership.LabelManagedBy && v == ownership.ManagedBy {
			return true
		}
		if prefix, _, ok := strings.Cut(k, "/"); ok && clusteropsGroup(prefix) && prefix != v1alpha1.Group {
			return true
		}
	}
	return backupMark.Exists().Matches(labels.Set(o.Labels))
}

func clusteropsGroup(g string) bool {
	return g == "clusterops.io" || strings.HasSuffix(g, ".clusterops.io")
}
