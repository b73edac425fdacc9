package target

import (
	"context"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// withRef is a managed resource seen through another of the configs it
// names, so that config resolution reads ref instead of
// spec.providerConfigRef.
type withRef struct {
	resource.ModernManaged
	ref *xpv2.ProviderConfigReference
}

func (w withRef) GetProviderConfigReference() *xpv2.ProviderConfigReference { return w.ref }

// ResolveRef returns the cluster that config ref, named by mg in a field other
// than spec.providerConfigRef (such as a CopyRule's source side), describes,
// with the reach that config grants mg. It tracks that mg uses the config in
// a ProviderConfigUsage of its own, named after mg's UID and role, so that
// the config cannot be deleted while mg names it either.
func (r *Resolver) ResolveRef(ctx context.Context, mg resource.ModernManaged, ref xpv2.ProviderConfigReference, role string) (*Cluster, error) {
	if err := r.trackRef(ctx, mg, ref, role); err != nil {
		return nil, err
	}
	w := withRef{ModernManaged: mg, ref: &ref}
	rc, err := r.config(ctx, w)
	if err != nil {
		return nil, err
	}
	rc.key = ConfigKey(w)
	return r.cluster(ctx, rc)
}

// ReleaseRef deletes the usage ResolveRef tracked for role, once mg no longer
// names a config there. It reads the usage from the cache first, so a
// resource that never named one costs no request.
func (r *Resolver) ReleaseRef(ctx context.Context, mg resource.ModernManaged, role string) error {
	u := &v1alpha1.ProviderConfigUsage{}
	err := r.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: refUsageName(mg, role)}, u)
	switch {
	case kerrors.IsNotFound(err):
		// Never named a config there, or released it already.
		return nil
	case err != nil:
		return errors.Wrap(err, "cannot get ProviderConfigUsage")
	case !metav1.IsControlledBy(u, mg):
		// Not this resource's usage: never delete it.
		return nil
	}
	return errors.Wrap(resource.IgnoreNotFound(r.kube.Delete(ctx, u)), "cannot delete ProviderConfigUsage")
}

func refUsageName(mg resource.ModernManaged, role string) string {
	return string(mg.GetUID()) + "-" + role
}

// trackRef tracks a config named outside spec.providerConfigRef, in a usage
// of its own: crossplane-runtime names the usage after the managed
// resource's UID alone, which the main config's usage holds.
func (r *Resolver) trackRef(ctx context.Context, mg resource.ModernManaged, ref xpv2.ProviderConfigReference, role string) error {
	return r.track(ctx, mg, ref, refUsageName(mg, role))
}

// track records that mg uses config ref in the ProviderConfigUsage name, as
// crossplane-runtime's tracker does (written only when the config it names
// changes), and carries mg's shard label onto it: a sharded replica caches
// the usages of its own shards, not the fleet's (provider's cacheOptions).
// A usage that cache cannot see, made before sharding or while mg was in
// another shard, is read from the API server and labelled again.
func (r *Resolver) track(ctx context.Context, mg resource.ModernManaged, ref xpv2.ProviderConfigReference, name string) error {
	gvk := mg.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		var err error
		if gvk, err = apiutil.GVKForObject(mg, r.scheme); err != nil {
			return errors.Wrap(err, "cannot determine the managed resource's kind")
		}
	}
	u := &v1alpha1.ProviderConfigUsage{}
	u.SetName(name)
	u.SetNamespace(mg.GetNamespace())
	u.SetLabels(shard.Carry(map[string]string{xpv2.LabelKeyProviderName: ref.Name, xpv2.LabelKeyProviderKind: ref.Kind}, mg.GetLabels()))
	u.SetOwnerReferences([]metav1.OwnerReference{meta.AsController(meta.TypedReferenceTo(mg, gvk))})
	u.SetProviderConfigReference(xpv2.ProviderConfigReference{Name: ref.Name, Kind: ref.Kind})
	u.SetResourceReference(xpv2.TypedReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: mg.GetName()})
	controllable := resource.MustBeControllableBy(mg.GetUID())
	stale := resource.AllowUpdateIf(func(current, _ runtime.Object) bool {
		c, ok := current.(*v1alpha1.ProviderConfigUsage)
		return ok && (c.GetProviderConfigReference() != u.GetProviderConfigReference() ||
			c.GetLabels()[xpv2.LabelKeyProviderName] != ref.Name || c.GetLabels()[shard.Label] != u.GetLabels()[shard.Label])
	})
	err := resource.NewAPIUpdatingApplicator(r.kube).Apply(ctx, u, controllable, stale)
	if kerrors.IsAlreadyExists(err) {
		err = r.relabel(ctx, u, controllable, stale)
	}
	return errors.Wrap(resource.Ignore(resource.IsNotAllowed, err), "cannot track ProviderConfig usage")
}

// relabel updates usage u, which exists though the cache does not hold it,
// from what the API server has.
func (r *Resolver) relabel(ctx context.Context, u *v1alpha1.ProviderConfigUsage, checks ...resource.ApplyOption) error {
	current := &v1alpha1.ProviderConfigUsage{}
	if err := r.live.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, current); err != nil {
		return errors.Wrap(err, "cannot get ProviderConfigUsage")
	}
	for _, check := range checks {
		if err := check(ctx, current, u); err != nil {
			return err
		}
	}
	u.SetResourceVersion(current.GetResourceVersion())
	return r.kube.Update(ctx, u)
}
