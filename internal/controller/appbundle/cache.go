package appbundle

import (
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/clusterops/provider-clusterops/internal/ownwrite"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// AppBundles watch and read their Deployments, claims and Services through a
// cache of their own, not the manager's: it holds whole objects, status
// included (readiness is judged from a Deployment's status), but only those
// that carry LabelOwner. The manager's cache cannot hold them so: its
// per-object options are keyed by kind, so a label selector for Deployments
// there would also narrow the metadata watch of every Deployment that
// ConfigRollout relies on.

// CacheOptions are the options of the cache of the objects AppBundles make:
// Deployments, claims and Services that carry LabelOwner (and, on a sharded
// replica, a shard of share), each with only the managed fields of the
// provider's field manager (what it owns of an object is what drift is judged
// by: see drift.go) and none of the others', which a bundle never reads and
// would only cost heap.
func CacheOptions(s *runtime.Scheme, m apimeta.RESTMapper, hc *http.Client, share klabels.Selector) cache.Options {
	return cache.Options{
		HTTPClient:           hc,
		Scheme:               s,
		Mapper:               m,
		DefaultLabelSelector: shard.Within(bundleMark.Exists(), share),
		DefaultTransform:     keepOwnManagedFields,
	}
}

// keepOwnManagedFields drops the managed fields of every field manager but
// the provider's from an object before it is cached.
func keepOwnManagedFields(in any) (any, error) {
	o, err := apimeta.Accessor(in)
	if err != nil || o.GetManagedFields() == nil {
		return in, nil //nolint:nilerr // Not an object, or none to strip.
	}
	var own []metav1.ManagedFieldsEntry
	for _, f := range o.GetManagedFields() {
		if f.Manager == FieldManager {
			own = append(own, f)
		}
	}
	o.SetManagedFields(own)
	return in, nil
}

var _ toolscache.TransformFunc = keepOwnManagedFields

// Kinds of the objects an AppBundle makes, as its own writes are keyed.
const (
	kindDeployment = "Deployment"
	kindClaim      = "PersistentVolumeClaim"
	kindService    = "Service"
)

// sources are the watches of an AppBundle's objects in c: each event of one
// that concerns the bundle (changed says which updates do) and is not the
// bundle's own write reconciles the bundle named by its LabelOwner.
func sources(c cache.Cache, own *ownwrite.Filter[ownwrite.Key], h handler.EventHandler) []source.Source {
	return []source.Source{
		source.Kind(c, client.Object(&appsv1.Deployment{}), h, changes(own, kindDeployment, deploymentChanged)),
		source.Kind(c, client.Object(&corev1.PersistentVolumeClaim{}), h, changes(own, kindClaim, claimChanged)),
		source.Kind(c, client.Object(&corev1.Service{}), h, changes(own, kindService, serviceChanged)),
	}
}

// changes passes the creation and update events of objects of kind that are
// not the AppBundle's own writes, the updates only where changed says they
// concern it, and every deletion. The event of a bundle's own write does not
// reconcile it again: the reconcile that wrote the object judged the bundle
// by the object as the API server answered.
func changes[T client.Object](own *ownwrite.Filter[ownwrite.Key], kind string, changed func(old, cur T) bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e ctrlevent.CreateEvent) bool {
			_, mine := own.Heard(ownwrite.KeyOf(kind, e.Object), ownwrite.Event{New: e.Object.GetResourceVersion()})
			return !mine
		},
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			ev := ownwrite.Event{Old: e.ObjectOld.GetResourceVersion(), New: e.ObjectNew.GetResourceVersion()}
			if _, mine := own.Heard(ownwrite.KeyOf(kind, e.ObjectNew), ev); mine {
				return false
			}
			o, okOld := e.ObjectOld.(T)
			n, okNew := e.ObjectNew.(T)
			return !okOld || !okNew || changed(o, n)
		},
		DeleteFunc: func(e ctrlevent.DeleteEvent) bool {
			own.Forget(ownwrite.KeyOf(kind, e.Object))
			return true
		},
		GenericFunc: func(ctrlevent.GenericEvent) bool { return true },
	}
}
