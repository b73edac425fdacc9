package appbundle

import (
	"net/http"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// AppBundles watch and read their Deployments, claims and Services through a
// cache of their own, not the manager's: it holds whole objects, status
// included (readiness is judged from a Deployment's status), but only those
// that carry LabelOwner. The manager's cache cannot hold them so: its
// per-object options are keyed by kind, so a label selector for Deployments
// there would also narrow the metadata watch of every Deployment that
// ConfigRollout relies on.

// CacheOptions are the options of the cache of the objects AppBundles make:
// Deployments, claims and Services that carry LabelOwner, each with only the
// managed fields of the provider's field manager (what it owns of an object is
// what drift is judged by: see drift.go) and none of the others', which a
// bundle never reads and would only cost heap.
func CacheOptions(s *runtime.Scheme, m apimeta.RESTMapper, hc *http.Client) cache.Options {
	return cache.Options{
		HTTPClient:           hc,
		Scheme:               s,
		Mapper:               m,
		DefaultLabelSelector: bundleMark.Exists(),
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
func sources(c cache.Cache, own *ownWrites, h handler.EventHandler) []source.Source {
	return []source.Source{
		source.Kind(c, client.Object(&appsv1.Deployment{}), h, changes(own, kindDeployment, deploymentChanged)),
		source.Kind(c, client.Object(&corev1.PersistentVolumeClaim{}), h, changes(own, kindClaim, claimChanged)),
		source.Kind(c, client.Object(&corev1.Service{}), h, changes(own, kindService, serviceChanged)),
	}
}

// changes passes the creation and update events of objects of kind that are
// not the AppBundle's own writes, the updates only where changed says they
// concern it, and every deletion.
func changes[T client.Object](own *ownWrites, kind string, changed func(old, cur T) bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e ctrlevent.CreateEvent) bool { return !own.heard(kind, e.Object, true) },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			if own.heard(kind, e.ObjectNew, false) {
				return false
			}
			o, okOld := e.ObjectOld.(T)
			n, okNew := e.ObjectNew.(T)
			return !okOld || !okNew || changed(o, n)
		},
		DeleteFunc: func(e ctrlevent.DeleteEvent) bool {
			own.forget(kind, e.Object)
			return true
		},
		GenericFunc: func(ctrlevent.GenericEvent) bool { return true },
	}
}

// ownWrites remembers the versions the AppBundles' writes left their objects
// at, so that the event of such a version does not reconcile the bundle again:
// the reconcile that wrote it knew what it wrote. Events come in the order of
// the versions, so hearing one forgets it and the writes before it; a write
// whose event never comes (one that changed nothing and so left no new
// version) is forgotten once maxOwnWrites newer ones of the object are noted,
// or when the object is deleted.
//
// The event of a create can come before the create's answer does, so the
// creates in flight are remembered too: the creation event of an object
// being created is the create's own.
type ownWrites struct {
	mu sync.Mutex
	rv map[ownKey][]string
	// creating holds the creates in flight, each with the version of its
	// creation event once heard.
	creating map[ownKey]string
}

// maxOwnWrites is how many versions of one object are remembered at most.
const maxOwnWrites = 4

type ownKey struct{ kind, namespace, name string }

func newOwnWrites() *ownWrites {
	return &ownWrites{rv: map[ownKey][]string{}, creating: map[ownKey]string{}}
}

func keyOf(kind string, o client.Object) ownKey {
	return ownKey{kind: kind, namespace: o.GetNamespace(), name: o.GetName()}
}

// write notes that o is about to be written, and returns what to call with
// the write's outcome: o as the API server answered, or the write's error.
// create says the object does not exist yet. A nil ownWrites notes nothing.
func (w *ownWrites) write(kind string, o client.Object, create bool) func(error) {
	if w == nil {
		return func(error) {}
	}
	k := keyOf(kind, o)
	if create {
		w.mu.Lock()
		w.creating[k] = ""
		w.mu.Unlock()
	}
	return func(err error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		heard, inFlight := w.creating[k]
		delete(w.creating, k)
		rv := o.GetResourceVersion()
		if err != nil || rv == "" || (inFlight && heard == rv) {
			return
		}
		w.rv[k] = append(w.rv[k], rv)
		w.rv[k] = w.rv[k][max(0, len(w.rv[k])-maxOwnWrites):]
	}
}

// heard reports whether an event of o is one of the provider's own writes of
// it, and then forgets that write and the ones before it. created says the
// event is o's creation.
func (w *ownWrites) heard(kind string, o client.Object, created bool) bool {
	if w == nil {
		return false
	}
	k := keyOf(kind, o)
	w.mu.Lock()
	defer w.mu.Unlock()
	rvs := w.rv[k]
	for i, rv := range rvs {
		if rv != o.GetResourceVersion() {
			continue
		}
		if rest := rvs[i+1:]; len(rest) > 0 {
			w.rv[k] = rest
		} else {
			delete(w.rv, k)
		}
		return true
	}
	if heard, inFlight := w.creating[k]; created && inFlight && heard == "" {
		w.creating[k] = o.GetResourceVersion()
		return true
	}
	return false
}

// forget forgets the writes of an object that is gone.
func (w *ownWrites) forget(kind string, o client.Object) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, keyOf(kind, o))
}

// len is how many objects have writes remembered, in flight or done.
func (w *ownWrites) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.rv) + len(w.creating)
}
