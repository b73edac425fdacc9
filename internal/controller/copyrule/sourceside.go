package copyrule

import (
	"context"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// sourceRole names the usage a rule's source-side config is tracked in.
const sourceRole = "source"

// sourceCluster returns the cluster the rule reads its sources on: the one
// spec.forProvider.source.providerConfigRef names, within that config's
// reach, or the rule's own (target) cluster.
func (e *external) sourceCluster(ctx context.Context, cr *v1alpha1.CopyRule) (*target.Cluster, error) {
	s := cr.Spec.ForProvider.Source
	if s == nil || e.resolver == nil {
		if e.resolver != nil {
			// A source config the rule named before is in use no more.
			if err := e.resolver.ReleaseRef(ctx, cr, sourceRole); err != nil {
				return nil, err
			}
		}
		return e.cluster, nil
	}
	ref := xpv2.ProviderConfigReference{Kind: s.ProviderConfigRef.Kind, Name: s.ProviderConfigRef.Name}
	c, err := e.resolver.ResolveRef(ctx, cr, ref, sourceRole)
	return c, errors.Wrap(err, "cannot resolve spec.forProvider.source.providerConfigRef")
}

// SameCluster reports whether clusters a and b are one, so that a rule's
// source namespaces cannot be its targets: the same config and credentials,
// or two that reach the same API server.
func SameCluster(a, b *target.Cluster) bool {
	return a.ID == b.ID || (a.Config != nil && b.Config != nil && a.Config.Host == b.Config.Host)
}

// sourceReach returns how a rule in namespace own, reading its sources
// srcNSs on cluster src and writing its copies on cluster tgt, checks that it
// may read each source namespace, and the namespaces that can never be its
// targets. The source side's config (src's reach) decides, on whichever
// cluster it is: on the targets' cluster, from the labels of the namespaces
// nss already read there, and no source namespace is a target; on another,
// by reading the namespace there when the reach needs its labels.
func sourceReach(ctx context.Context, tgt, src *target.Cluster, own string, srcNSs []string, nss []Namespace) (check func(ns string) error, notTargets []string) {
	if !SameCluster(tgt, src) {
		return func(ns string) error { return src.CheckNamespace(ctx, own, ns) }, nil
	}
	return reachIn(src.Reach, own, nss), srcNSs
}

// checkSources returns an error naming every source namespace the source
// side's config does not let the rule read. A rule with one such namespace
// reads none: its other sources could conflict with the unseen ones, and
// copies of unread sources must not be pruned as if they were gone.
func checkSources(nss []string, check func(ns string) error) error {
	var out []string
	for _, ns := range nss {
		if err := check(ns); err != nil {
			out = append(out, err.Error())
		}
	}
	if len(out) == 0 {
		return nil
	}
	return errors.New(strings.Join(out, "; "))
}

// A sideRef names the config of one side of a cross-cluster rule: its
// own (spec.providerConfigRef, the target side) or its source's.
type sideRef struct{ Kind, Name string }

// sideError says on which side of a cross-cluster rule err happened, so
// that a cluster that is down is named in the Synced condition.
func sideError(err error, side string, ref *sideRef) error {
	if err == nil || ref == nil {
		return err
	}
	return errors.Wrapf(err, "%s cluster (%s %q)", side, ref.Kind, ref.Name)
}

// targetRef is the rule's spec.providerConfigRef, or nil when the rule is
// not cross-cluster and errors need no side.
func targetRef(cr *v1alpha1.CopyRule) *sideRef {
	r := cr.GetProviderConfigReference()
	if cr.Spec.ForProvider.Source == nil || r == nil {
		return nil
	}
	return &sideRef{Kind: r.Kind, Name: r.Name}
}

// sourceRef is the rule's source-side config, or nil.
func sourceRef(cr *v1alpha1.CopyRule) *sideRef {
	if s := cr.Spec.ForProvider.Source; s != nil {
		return &sideRef{Kind: s.ProviderConfigRef.Kind, Name: s.ProviderConfigRef.Name}
	}
	return nil
}

// conflictEvent is the Warning of a new conflict between source namespaces.
func conflictEvent(name string, refs []Ref) error {
	return errors.Errorf("copy %q: %s", name, ConflictMessage(refs))
}
