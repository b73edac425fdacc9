// Package urgency ranks a change to an object a managed resource made or
// references above the backlog of new managed resources in a controller's
// priority queue. Applying 10,000 managed resources at once queues 10,000
// first reconciles; a ConfigMap edited meanwhile must not wait behind them
// for its rollout, nor a deleted pod for its successor. Events of an
// informer's initial list and of resyncs keep the low priority
// controller-runtime gives them: they are no change.
package urgency

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
)

// Priority ranks urgent requests; new managed resources have 0, the initial
// list and resyncs handler.LowPriority.
const Priority = 10

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// Handler wraps h so that the requests it adds without a priority of their
// own are urgent.
func Handler(h handler.EventHandler) handler.EventHandler { return urgent{h} }

type urgent struct{ h handler.EventHandler }

func (u urgent) Create(ctx context.Context, e event.CreateEvent, q queue) {
	u.h.Create(ctx, e, Queue(q))
}

func (u urgent) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	u.h.Update(ctx, e, Queue(q))
}

func (u urgent) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	u.h.Delete(ctx, e, Queue(q))
}

func (u urgent) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	u.h.Generic(ctx, e, Queue(q))
}

// Queue returns q with urgent requests by default, when q is a priority
// queue; q itself otherwise.
func Queue(q queue) queue {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return urgentQueue{pq}
	}
	return q
}

// urgentQueue is still a priority queue, so that handlers inside it still
// give the initial list and resyncs their low priority.
type urgentQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q urgentQueue) Add(r reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, r) }

func (q urgentQueue) AddWithOpts(o priorityqueue.AddOpts, rs ...reconcile.Request) {
	if o.Priority == nil {
		p := Priority
		o.Priority = &p
		for _, r := range rs {
			pending.Store(r, struct{}{})
		}
	}
	q.PriorityQueue.AddWithOpts(o, rs...)
}

// pending are the requests added as urgent and not reconciled since. Keyed
// by request alone, a resource of another kind with the same namespace and
// name may skip the limiter once too: harmless.
var pending sync.Map

// Limited is crossplane-runtime's ratelimiter.NewReconciler(name, r, l) for
// every request but urgent ones, which run at once. The global limiter hands
// out its slots in the order reconciles ask for them, and a controller's
// workers drain a queue of 10,000 new resources into slots up to 100 s ahead
// at the default rate, so a change heard meanwhile would wait for all of them
// whatever its rank in the queue. Urgent reconciles come from changes made in
// the cluster, whose rate the limiter is not there to bound; the client's
// QPS limit and the controller's workers still do.
func Limited(name string, r reconcile.Reconciler, l ratelimiter.RateLimiter) reconcile.Reconciler {
	return limited{urgent: r, routine: ratelimiter.NewReconciler(name, r, l)}
}

type limited struct{ urgent, routine reconcile.Reconciler }

func (l limited) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if _, ok := pending.LoadAndDelete(req); ok {
		return l.urgent.Reconcile(ctx, req)
	}
	return l.routine.Reconcile(ctx, req)
}
