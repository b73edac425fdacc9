package configrollout

import (
	"context"
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/flow"
	"github.com/clusterops/provider-clusterops/internal/ownwrite"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// indexWorkloads is the field index of ConfigRollouts by the workloads an
// event may concern: "Deployment/web" for a named one, the marker
// selectorMarker for rollouts that pick workloads by label, and for those
// that pick them by use each of their sources (autoSource; autoRollouts
// counts them). A workload event then reconciles the rollouts that name it,
// not every rollout of its namespace: with N rollouts in one namespace, that
// is what keeps converging them O(N) rather than O(N²).
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
		return autoSources(p)
	}
}

func workloadKey(kind, name string) string { return kind + "/" + name }

// readerKey names a workload as readers keeps it: its "Kind/name" in its
// namespace.
func readerKey(ns, kind, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: workloadKey(kind, name)}
}

// referencing returns the ConfigRollouts a workload event may concern: those
// that name the workload, the one its lock names, those whose selector
// matches its labels, and the automatic ones whose sources it reads (with
// more than one automatic rollout in the namespace, rd tells which: the
// metadata watch does not carry the template). h says what the event is.
// Rollouts are read from the cache without copies: only their names and
// selectors are looked at.
func referencing(ctx context.Context, c client.Reader, rd *readers, autos *autoRollouts, kind string, o client.Object, h watchset.Happening) []reconcile.Request {
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
	for _, r := range autoReferencing(ctx, rd, autos, kind, o, h, byIndex) {
		add(r)
	}
	return out
}

// autoReferencing names the automatic rollouts a workload event may concern.
// With one of them in the namespace it is that one, as cheap as finding out;
// with more, those whose sources the workload reads, or all when that cannot
// be known (a deleted workload never seen, or a failed read). A workload in
// the first list concerns none of several: every rollout is reconciled as the
// provider starts, and learns what the workloads of its namespace read then,
// in a list of them; reading each workload here, one at a time in the
// watch's event handler, took 10,000 reads and 90 s to a restart with
// 10,000 in one namespace.
func autoReferencing(ctx context.Context, rd *readers, autos *autoRollouts, kind string, o client.Object, h watchset.Happening, byIndex func(string, ...client.ListOption) []v1alpha1.ConfigRollout) []string {
	var srcs []string
	ok := false
	if h == watchset.Gone {
		srcs, ok = rd.forget(kind, o)
	}
	only, n := autos.in(o.GetNamespace())
	switch {
	case n == 0:
		return nil
	case n == 1:
		return []string{only}
	case h == watchset.Listed:
		return nil
	case h == watchset.Changed:
		var err error
		srcs, _, err = rd.sources(ctx, kind, o)
		ok = err == nil
	}
	var out []string
	if !ok {
		return autos.all(o.GetNamespace())
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
func workloadHandler(fc *flow.Control, kind string, c client.Reader, rd *readers, autos *autoRollouts, own *ownwrite.Filter[ownwrite.Key]) handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], skip string, h watchset.Happening, objs ...client.Object) {
		// All of an event's rollouts are found before any is queued: finding
		// them may read the workload, and a rollout queued for the old
		// object could start meanwhile and be queued again for the new one.
		seen := map[reconcile.Request]bool{}
		var all []reconcile.Request
		for _, o := range objs {
			for _, r := range referencing(ctx, c, rd, autos, kind, o, h) {
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
	// rank above new rollouts (flow).
	return fc.Handler(handler.Funcs{
		CreateFunc: func(ctx context.Context, e ctrlevent.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			rd.seen(kind, e.Object)
			h := watchset.Changed
			if e.IsInInitialList {
				h = watchset.Listed
			}
			enqueue(ctx, q, "", h, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e ctrlevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			w, h := writer(own, kind, e, func(o types.NamespacedName) { q.Add(reconcile.Request{NamespacedName: o}) })
			if h == ownwrite.Own && e.ObjectOld.GetAnnotations()[AnnotationLock] == w {
				// A new hash in the pod template of a workload the writer
				// already held changes nothing any other rollout decides on.
				return
			}
			n := e.ObjectNew
			if h == ownwrite.Own && n.GetGeneration() != e.ObjectOld.GetGeneration() {
				// The writer's own write changed an annotation of the pod
				// template, not what it reads: that is known at the old
				// generation, and is not read again for the new one.
				n = n.DeepCopyObject().(client.Object) //nolint:forcetypeassert // A copy of an object is one.
				n.SetGeneration(e.ObjectOld.GetGeneration())
			}
			rd.seen(kind, n)
			enqueue(ctx, q, w, watchset.Changed, e.ObjectOld, n)
		},
		DeleteFunc: func(ctx context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			own.Forget(ownwrite.KeyOf(kind, e.Object))
			enqueue(ctx, q, "", watchset.Gone, e.Object)
		},
	})
}

// writer returns the ConfigRollout whose own write the update e of a workload
// of kind is, and forgets the write: each is heard of once. It is the
// workload as that rollout's write was answered, which carries its lock.
// A roll is an apply, which has no precondition: its event that comes before
// its answer is taken Unsure, and only the writer is left out for it; the
// writer is queued (later) if the answer shows the event was somebody else's.
func writer(own *ownwrite.Filter[ownwrite.Key], kind string, e ctrlevent.UpdateEvent, later func(types.NamespacedName)) (string, ownwrite.Hearing) {
	o := e.ObjectNew
	ev := ownwrite.Event{Old: e.ObjectOld.GetResourceVersion(), New: o.GetResourceVersion()}
	r, h := own.Await(ownwrite.KeyOf(kind, o), ev, later)
	return r.Name, h
}

// watchWorkloads watches every workload kind as metadata only: a new, deleted
// or re-templated workload matters, and so does a released lock (an
// annotation); status churn does not.
func watchWorkloads(fc *flow.Control, b *builder.Builder, c client.Reader, rd *readers, autos *autoRollouts, own *ownwrite.Filter[ownwrite.Key]) *builder.Builder {
	for _, kind := range Kinds {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(GroupVersionKind(kind))
		b = b.Watches(m, workloadHandler(fc, kind, c, rd, autos, own), builder.OnlyMetadata, workloadChanges)
	}
	return b
}

// autoRollouts are the auto rollouts of each namespace, kept from the
// ConfigRollout informer's events. Every workload event asks how many its
// namespace has (none, one and which, or more): a list of the index for it
// costs O(auto rollouts of the namespace), O(N²) as N of them in one
// namespace converge.
//
// On a sharded replica a rollout relabelled between two shards it holds is
// added by one shard's cache and deleted by the other's, in either order:
// each name keeps the shard it was last added under, and a deletion under
// another shard is not its.
type autoRollouts struct {
	mu sync.RWMutex
	by map[string]map[string]string // namespace → name → shard label
}

func newAutoRollouts() *autoRollouts {
	return &autoRollouts{by: map[string]map[string]string{}}
}

// isAuto is whether cr picks its workloads by use (indexValues' last case).
func isAuto(cr *v1alpha1.ConfigRollout) bool {
	return len(cr.Spec.ForProvider.Workloads) == 0 && cr.Spec.ForProvider.Selector == nil
}

// set records whether o, a ConfigRollout that exists, is an auto rollout.
func (a *autoRollouts) set(o any) {
	cr, ok := o.(*v1alpha1.ConfigRollout)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !isAuto(cr) {
		a.forget(cr)
		return
	}
	if a.by[cr.Namespace] == nil {
		a.by[cr.Namespace] = map[string]string{}
	}
	a.by[cr.Namespace][cr.Name] = cr.GetLabels()[shard.Label]
}

// remove forgets o, a ConfigRollout that is gone, unless it was added since
// under another shard.
func (a *autoRollouts) remove(o any) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	cr, ok := o.(*v1alpha1.ConfigRollout)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if at, ok := a.by[cr.Namespace][cr.Name]; ok && at == cr.GetLabels()[shard.Label] {
		a.forget(cr)
	}
}

// forget forgets cr; a.mu is held.
func (a *autoRollouts) forget(cr *v1alpha1.ConfigRollout) {
	delete(a.by[cr.Namespace], cr.Name)
	if len(a.by[cr.Namespace]) == 0 {
		delete(a.by, cr.Namespace)
	}
}

// in returns how many auto rollouts ns has, and the name of the only one.
func (a *autoRollouts) in(ns string) (only string, n int) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	names := a.by[ns]
	if len(names) == 1 {
		for name := range names {
			only = name
		}
	}
	return only, len(names)
}

// all returns the names of the auto rollouts of ns.
func (a *autoRollouts) all(ns string) []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Sorted(maps.Keys(a.by[ns]))
}

// handler keeps a from the ConfigRollout informer's events.
func (a *autoRollouts) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { a.set(o) },
		UpdateFunc: func(_, o any) { a.set(o) },
		DeleteFunc: a.remove,
	}
}
