package chaosagent

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
)

// systemNamespaces are acted in only when a ClusterProviderConfig's reach
// grants them explicitly: being the agent's own namespace is not enough.
var systemNamespaces = reach.DefaultDenied

// A checkFn says whether a managed resource in namespace own may act in ns.
type checkFn func(own, ns string) error

// mayActIn decides whether an agent in namespace own may act in ns. The
// provider's namespace is never acted in.
func mayActIn(check checkFn, providerNamespace, own, ns string) error {
	if ns == providerNamespace {
		return &reach.OutOfReachError{Namespace: ns, Reason: "it is the provider's own namespace"}
	}
	if slices.Contains(systemNamespaces, ns) {
		// Checked as if the agent lived elsewhere, so only an explicit grant counts.
		if err := check("", ns); err != nil {
			return &reach.OutOfReachError{Namespace: ns, Reason: "it is a system namespace, acted in only when a ClusterProviderConfig's reach grants it and does not deny it"}
		}
		return nil
	}
	return check(own, ns)
}

// wantedNamespaces are the namespaces an agent targets, before reach: those
// it names and those its selector matches, or its own when it names none.
func wantedNamespaces(p v1alpha1.ChaosAgentParameters, own string, selected []string) []string {
	out := slices.Clone(p.Namespaces)
	if len(p.Namespaces) == 0 && p.NamespaceSelector == nil {
		out = []string{own}
	}
	out = append(out, selected...)
	slices.Sort(out)
	return slices.Compact(out)
}

// targetNamespaces lists the namespaces a round acts in, with a note for each
// namespace the agent targets but may not act in.
func (e *external) targetNamespaces(ctx context.Context, ca *v1alpha1.ChaosAgent, s Spec) ([]string, []string, error) {
	var selected []string
	if s.NamespaceSelector != nil {
		l := &corev1.NamespaceList{}
		if err := e.cluster.Client.List(ctx, l, client.MatchingLabelsSelector{Selector: s.NamespaceSelector}); err != nil {
			return nil, nil, errors.Wrap(err, "cannot list the namespaces namespaceSelector selects")
		}
		for _, n := range l.Items {
			if n.GetDeletionTimestamp() == nil {
				selected = append(selected, n.GetName())
			}
		}
	}
	check := func(own, ns string) error { return e.cluster.CheckNamespace(ctx, own, ns) }
	var ok, notes []string
	for _, ns := range wantedNamespaces(ca.Spec.ForProvider, ca.GetNamespace(), selected) {
		if excluded(s.Excluded, ns) {
			continue
		}
		err := mayActIn(check, e.cluster.Reach.ProviderNamespace, ca.GetNamespace(), ns)
		switch {
		case err == nil:
			ok = append(ok, ns)
		case reach.IsOutOfReach(err):
			notes = append(notes, err.Error())
		default:
			return nil, nil, err
		}
	}
	return ok, notes, nil
}
