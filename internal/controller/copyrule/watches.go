package copyrule

// This file holds the rule's watches: which it keeps on the cluster it
// writes to and on the one it reads its sources on, which events of them
// concern it, and what it reads from them instead of the API server (the
// namespaces, the names a selector's watch holds).

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// watch keeps the rule's watches: its copies, the namespaces and the objects
// in the way of its copies (whose removal frees the place) on the cluster it
// writes to, and its sources in each source namespace on the cluster it reads
// them on (e.source; none while the rule is being deleted). A source watch is
// keyed by cluster, namespace and selector or name, so rules reading the same
// namespace share it.
func (e *external) watch(cr *v1alpha1.CopyRule, problems []v1alpha1.CopyProblem) error {
	p := cr.Spec.ForProvider
	res := e.src.Resource
	copyRes := e.dst.Resource
	ws := []watchset.Watch{
		namespacesWatch,
		copiesWatch(cr, e.dst),
	}
	var sws []watchset.Watch
	if e.source != nil {
		sws = selectorWatches(p, e.src, SourceNamespaces(p, cr.GetNamespace()))
	}
	for _, src := range SourceNamespaces(p, cr.GetNamespace()) {
		if e.source == nil {
			break
		}
		for _, n := range p.Names {
			sws = append(sws, watchset.Watch{Resource: res, Namespace: src, Fields: "metadata.name=" + n})
		}
	}
	for _, pr := range problems {
		if pr.Reason == v1alpha1.ProblemConflict {
			ws = append(ws, watchset.Watch{Resource: copyRes, Namespace: pr.Namespace, Fields: "metadata.name=" + pr.Name})
		}
	}
	owner := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	e.watches.SetInterest(owner, interest(cr))
	on := []watchset.On{{Cluster: e.cluster, Watches: ws}}
	if e.source != nil {
		on = append(on, watchset.On{Cluster: e.source, Watches: sws})
	}
	return errors.Wrap(e.watches.EnsureOn(owner, on...), "cannot watch the rule's sources and copies")
}

// selectorWatches are the watches of a rule's selector in each source
// namespace; none without a selector, or with one that is not valid (the
// read says so).
func selectorWatches(p v1alpha1.CopyRuleParameters, kind Mapping, nss []string) []watchset.Watch {
	if p.Selector == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(p.Selector)
	if err != nil {
		return nil
	}
	out := make([]watchset.Watch, 0, len(nss))
	for _, ns := range nss {
		out = append(out, selectorWatch(kind, ns, s))
	}
	return out
}

// selectorWatch is the watch of the objects of kind that selector s picks in
// source namespace ns, shared by every rule with that selector there.
func selectorWatch(kind Mapping, ns string, s labels.Selector) watchset.Watch {
	return watchset.Watch{Resource: kind.Resource, Namespace: ns, Labels: s.String()}
}

// held returns which sources the selector watches of a rule with
// parameters p on cluster c hold in each namespace; nil without a selector.
func (e *external) held(c *target.Cluster, p v1alpha1.CopyRuleParameters) held {
	if p.Selector == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(p.Selector)
	if err != nil {
		return nil
	}
	return func(ns string) ([]string, bool) {
		l, ok := e.watches.List(c, selectorWatch(e.src, ns, s))
		names := make([]string, 0, len(l))
		for _, m := range l {
			names = append(names, m.Name)
		}
		return names, ok
	}
}

// interest is what of the namespaces watch concerns the rule: its source
// namespaces and own namespace, and the namespaces its target mode selects (before or after
// a change). Every other namespace's events would reconcile every rule of the
// cluster for nothing: with many rules and namespaces coming and going, a storm.
func interest(cr *v1alpha1.CopyRule) watchset.Interest {
	match, err := matcher(cr.Spec.ForProvider)
	if err != nil {
		return nil
	}
	srcs, own := SourceNamespaces(cr.Spec.ForProvider, cr.GetNamespace()), cr.GetNamespace()
	return func(w watchset.Watch, o *watchset.Object) bool {
		if w != namespacesWatch {
			return true
		}
		return slices.Contains(srcs, o.Name) || o.Name == own || match(Namespace{Name: o.Name, Labels: o.Labels})
	}
}

// namespacesWatch is every rule's watch of the namespaces of its cluster. It
// keeps their labels, so that rules read namespaces from it rather than list
// them all on every reconcile.
var namespacesWatch = watchset.Watch{Resource: corev1.SchemeGroupVersion.WithResource("namespaces"), ReadLabels: true}

// namespaces returns the cluster's namespaces: from the namespaces watch once
// it has synced, from the API server before.
func (e *external) namespaces(ctx context.Context) ([]Namespace, error) {
	l, ok := e.watches.List(e.cluster, namespacesWatch)
	if !ok {
		return readNamespaces(ctx, e.cluster.Client)
	}
	out := make([]Namespace, 0, len(l))
	for _, n := range l {
		out = append(out, Namespace{Name: n.Name, Labels: n.Labels, Terminating: n.Deleting})
	}
	return out, nil
}
