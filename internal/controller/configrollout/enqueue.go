package configrollout

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/urgency"
)

// indexWorkloads is the field index of ConfigRollouts by the workloads an
// event may concern: "Deployment/web" for a named one, and the markers
// selectorMarker and autoMarker for rollouts that pick workloads by label or
// by use. A workload event then reconciles the rollouts that name it, not
// every rollout of its namespace: with N rollouts in one namespace, that is
// what keeps converging them O(N) rather than O(N²).
const indexWorkloads = "configrollout.workloads"

const (
	selectorMarker = "@selector"
	autoMarker     = "@auto"
)

// indexValues are a ConfigRollout's values of indexWorkloads.
func indexValues(o client.Object) []string {
	cr, ok := o.(*v1alpha1.ConfigRollout)
	if !ok {
		return nil
	}
	p := cr.Spec.ForProvider
	switch {
	case len(p.Workloads) > 0:
		out := make([]string, 0, len(p.Workloads))
		for _, w := range p.Workloads {
			out = append(out, workloadKey(w.Kind, w.Name))
		}
		return out
	case p.Selector != nil:
		return []string{selectorMarker}
	default:
		return append([]string{autoMarker}, autoSources(p)...)
	}
}

func workloadKey(kind, name string) string { return kind + "/" + name }

// ownWrites remembers each ConfigRollout's write to a workload, so that the
// event of that write does not reconcile the rollout that made it: it already
// knows. A write is marked before it is sent, as its event may arrive before
// its response, and completed with the generation it gave the workload; an
// event of any other generation is someone else's edit, and is heard. An edit
// made just before our write, whose event the mark takes for ours, is still
// heard: our own event, which then comes unmatched, reconciles the rollout.
type ownWrites struct {
	mu sync.Mutex
	by map[types.NamespacedName]ownWrite // workload "Kind/name" in its namespace
}

type ownWrite struct {
	rollout    string
	generation int64 // 0 while the write is in flight
}

func newOwnWrites() *ownWrites {
	return &ownWrites{by: map[types.NamespacedName]ownWrite{}}
}

func ownKey(ns, kind, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: workloadKey(kind, name)}
}

// begin marks a write of rollout to a workload as in flight.
func (w *ownWrites) begin(ns, kind, name, rollout string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.by[ownKey(ns, kind, name)] = ownWrite{rollout: rollout}
}

// done completes the write with the generation it left, or forgets it when it
// failed (generation 0). A write whose event was already heard is not marked
// again.
func (w *ownWrites) done(ns, kind, name, rollout string, generation int64) {
	k := ownKey(ns, kind, name)
	w.mu.Lock()
	defer w.mu.Unlock()
	ow, ok := w.by[k]
	switch {
	case !ok || ow.rollout != rollout || ow.generation != 0:
	case generation == 0:
		delete(w.by, k)
	default:
		w.by[k] = ownWrite{rollout: rollout, generation: generation}
	}
}

// writer returns the rollout whose own write o is, and forgets the write:
// each is heard of once.
func (w *ownWrites) writer(kind string, o client.Object) string {
	k := ownKey(o.GetNamespace(), kind, o.GetName())
	w.mu.Lock()
	defer w.mu.Unlock()
	ow, ok := w.by[k]
	if !ok || o.GetAnnotations()[AnnotationLock] != ow.rollout || (ow.generation != 0 && ow.generation != o.GetGeneration()) {
		return ""
	}
	delete(w.by, k)
	return ow.rollout
}

func (w *ownWrites) forget(kind string, o client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.by, ownKey(o.GetNamespace(), kind, o.GetName()))
}

// referencing returns the ConfigRollouts a workload event may concern: those
// that name the workload, the one its lock names, those whose selector
// matches its labels, and the automatic ones whose sources it reads (with
// more than one automatic rollout in the namespace, rd tells which: the
// metadata watch does not carry the template). deleted says the workload is
// gone. Rollouts are read from the cache without copies: only their names
// and selectors are looked at.
func referencing(ctx context.Context, c client.Reader, rd *readers, kind string, o client.Object, deleted bool) []reconcile.Request {
	ns := o.GetNamespace()
	seen := map[string]bool{}
	var out []reconcile.Request
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	byIndex := func(v string, opts ...client.ListOption) []v1alpha1.ConfigRollout {
		l := &v1alpha1.ConfigRolloutList{}
		opts = append(opts, client.InNamespace(ns), client.MatchingFields{indexWorkloads: v}, client.UnsafeDisableDeepCopy)
		if err := c.List(ctx, l, opts...); err != nil {
			return nil
		}
		return l.Items
	}
	add(o.GetAnnotations()[AnnotationLock])
	for _, cr := range byIndex(workloadKey(kind, o.GetName())) {
		add(cr.GetName())
	}
	for _, cr := range byIndex(selectorMarker) {
		if selects(cr.Spec.ForProvider.Selector, o.GetLabels()) {
			add(cr.GetName())
		}
	}
	for _, r := range autoReferencing(ctx, rd, kind, o, deleted, byIndex) {
		add(r)
	}
	return out
}

// autoReferencing names the automatic rollouts a workload event may concern.
// With one of them in the namespace it is that one, as cheap as finding out;
// with more, those whose sources the workload reads, or all when that cannot
// be known (a deleted workload never seen, or a failed read).
func autoReferencing(ctx context.Context, rd *readers, kind string, o client.Object, deleted bool, byIndex func(string, ...client.ListOption) []v1alpha1.ConfigRollout) []string {
	var srcs []string
	ok := false
	if deleted {
		srcs, ok = rd.forget(kind, o)
	}
	some := byIndex(autoMarker, client.Limit(2))
	switch {
	case len(some) == 0:
		return nil
	case len(some) == 1:
		return []string{some[0].GetName()}
	case !deleted:
		var err error
		srcs, _, err = rd.sources(ctx, kind, o)
		ok = err == nil
	}
	var out []string
	if !ok {
		for _, cr := range byIndex(autoMarker) {
			out = append(out, cr.GetName())
		}
		return out
	}
	for _, s := range srcs {
		for _, cr := range byIndex(s) {
			out = append(out, cr.GetName())
		}
	}
	return out
}

func selects(s *metav1.LabelSelector, l map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(l))
}

// workloadHandler maps events of one workload kind to the ConfigRollouts they
// concern, leaving out the rollout whose own write an update is.
func workloadHandler(kind string, c client.Reader, rd *readers, own *ownWrites) handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], skip string, deleted bool, objs ...client.Object) {
		// All of an event's rollouts are found before any is queued: finding
		// them may read the workload, and a rollout queued for the old
		// object could start meanwhile and be queued again for the new one.
		seen := map[reconcile.Request]bool{}
		var all []reconcile.Request
		for _, o := range objs {
			for _, r := range referencing(ctx, c, rd, kind, o, deleted) {
				if r.Name != skip && !seen[r] {
					seen[r] = true
					all = append(all, r)
				}
			}
		}
		for _, r := range all {
			q.Add(r)
		}
	}
	// TypedFuncs ranks events of the initial list and of resyncs below real
	// changes when the controller's queue is a priority queue; real changes
	// rank above new rollouts (urgency).
	return urgency.Handler(handler.Funcs{
		CreateFunc: func(ctx context.Context, e ctrlevent.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			rd.seen(kind, e.Object)
			enqueue(ctx, q, "", false, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e ctrlevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			w := own.writer(kind, e.ObjectNew)
			if w != "" && e.ObjectOld.GetAnnotations()[AnnotationLock] == w {
				// A new hash in the pod template of a workload the writer
				// already held changes nothing any other rollout decides on.
				return
			}
			n := e.ObjectNew
			if w != "" && n.GetGeneration() != e.ObjectOld.GetGeneration() {
				// The writer's own write changed an annotation of the pod
				// template, not what it reads: that is known at the old
				// generation, and is not read again for the new one.
				n = n.DeepCopyObject().(client.Object) //nolint:forcetypeassert // A copy of an object is one.
				n.SetGeneration(e.ObjectOld.GetGeneration())
			}
			rd.seen(kind, n)
			enqueue(ctx, q, w, false, e.ObjectOld, n)
		},
		DeleteFunc: func(ctx context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			own.forget(kind, e.Object)
			enqueue(ctx, q, "", true, e.Object)
		},
	})
}

// watchWorkloads watches every workload kind as metadata only: a new, deleted
// or re-templated workload matters, and so does a released lock (an
// annotation); status churn does not.
func watchWorkloads(b *builder.Builder, c client.Reader, rd *readers, own *ownWrites) *builder.Builder {
	for _, kind := range Kinds {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(GroupVersionKind(kind))
		b = b.Watches(m, workloadHandler(kind, c, rd, own), builder.OnlyMetadata, workloadChanges)
	}
	return b
}
