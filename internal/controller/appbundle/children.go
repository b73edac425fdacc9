package appbundle

// This file holds how the external client reads an AppBundle's objects: from
// the cache or the API server (get), and which of the objects found are the
// bundle's, in its way, or none of its business (children).

import (
	"context"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/ownership"
)

// children are an AppBundle's objects as they are; nil where missing.
type children struct {
	deployment *appsv1.Deployment
	pvc        *corev1.PersistentVolumeClaim
	service    *corev1.Service
}

// get reads o by name into o, returning false when it does not exist.
//
// Reads that decide a write (Create, Update, Delete) go to the API server, or
// are this reconcile's reads from it (e.read): a same-named object the
// AppBundle did not create must be seen as it is, so that it is never taken
// over or deleted by mistake. Observe, which writes
// nothing, reads the cache where there is one (cached): a hit carries
// LabelOwner and is judged by its value as the API server's copy would be,
// and any write it leads to reads again. A wanted object missing from the
// cache is read from the API server, as the cache holds only labelled objects
// and lags a create (so a missing Deployment is never created twice, and an
// unlabelled one is still seen in the way). An unwanted one missing from the
// cache is none of the bundle's business: an object it did not make, or one
// it just made whose event brings it back.
func (e *external) get(ctx context.Context, ns, name string, o client.Object, cached, wanted, observing bool) (bool, error) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	if cached && e.cache != nil {
		err := e.cache.Get(ctx, key, o)
		if err == nil || !kerrors.IsNotFound(err) || !wanted {
			return err == nil, errors.Wrapf(resource.IgnoreNotFound(err), "cannot get %T %q from the cache", o, name)
		}
	}
	k := fmt.Sprintf("%T/%s", o, name)
	if r, ok := e.read[k]; ok && !observing {
		// Used once: a read after this reconcile's writes goes to the API
		// server again.
		delete(e.read, k)
		if r == nil {
			return false, nil
		}
		reflect.ValueOf(o).Elem().Set(reflect.ValueOf(r).Elem())
		return true, nil
	}
	err := e.cluster.Client.Get(ctx, key, o)
	found := err == nil
	if kerrors.IsNotFound(err) {
		err = nil
	}
	if observing && err == nil {
		if e.read == nil {
			e.read = map[string]client.Object{}
		}
		e.read[k] = nil
		if found {
			e.read[k], _ = o.DeepCopyObject().(client.Object)
		}
	}
	return found, errors.Wrapf(err, "cannot get %T %q", o, name)
}

// children reads the AppBundle's objects: those it marked, and the unmarked
// ones it wants and may adopt. Another object named like one it wants is a
// conflict, reported as an error; one it does not want, or any unmarked one
// while the AppBundle is being deleted, is left alone and never blocks it.
// observing (Observe's reads) reads through the cache where there is one
// (see get), but never for a bundle being deleted.
func (e *external) children(ctx context.Context, ab *v1alpha1.AppBundle, observing bool) (children, error) {
	var c children
	d, p, s := &appsv1.Deployment{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{}
	cached := observing && !meta.WasDeleted(ab)
	for _, x := range []struct {
		name   string
		obj    client.Object
		wanted bool
		set    func()
	}{
		{ab.GetName(), d, true, func() { c.deployment = d }},
		{PVCName(ab), p, true, func() { c.pvc = p }},
		{ab.GetName(), s, wantsService(ab), func() { c.service = s }},
	} {
		ok, err := e.get(ctx, ab.GetNamespace(), x.name, x.obj, cached, x.wanted, observing)
		if err != nil {
			return c, err
		}
		switch ownership.Decide(ownership.Facts{Exists: ok, Marked: ok && bundleMark.On(x.obj, ab), Wanted: x.wanted, Adopt: ab.Spec.ForProvider.AdoptExisting, Deleting: meta.WasDeleted(ab)}) {
		case ownership.Mine:
			x.set()
		case ownership.InTheWay:
			kind := fmt.Sprintf("%T", x.obj)[len("*v1."):]
			return c, errors.Errorf("%s %q exists and was not created by this AppBundle: it is left alone; delete or rename it, or set spec.forProvider.adoptExisting: true to take it over", kind, x.name)
		case ownership.None:
		}
	}
	return c, nil
}
