package flow

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

// An urgent request ranks above the backlog of new managed resources in a
// controller's priority queue. Applying a fleet of managed resources at once
// queues a first reconcile for each; a ConfigMap edited meanwhile must not wait
// behind them for its rollout, nor a deleted pod for its successor. Events of
// an informer's initial list and of resyncs keep the low priority
// controller-runtime gives them: they are no change.

// priority ranks urgent requests; new managed resources have 0, the initial
// list and resyncs handler.LowPriority.
const priority = 10

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// Handler wraps h so that the requests it adds without a priority of their
// own are urgent.
func (c *Control) Handler(h handler.EventHandler) handler.EventHandler { return urgent{c, h} }

type urgent struct {
	c *Control
	h handler.EventHandler
}

func (u urgent) Create(ctx context.Context, e event.CreateEvent, q queue) {
	u.h.Create(ctx, e, u.c.Queue(q))
}

func (u urgent) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	u.h.Update(ctx, e, u.c.Queue(q))
}

func (u urgent) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	u.h.Delete(ctx, e, u.c.Queue(q))
}

func (u urgent) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	u.h.Generic(ctx, e, u.c.Queue(q))
}

// Queue returns q with urgent requests by default, when q is a priority
// queue; q itself otherwise.
func (c *Control) Queue(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return urgentQueue{pq, &c.pending}
	}
	return q
}

// urgentQueue is still a priority queue, so that handlers inside it still
// give the initial list and resyncs their low priority.
type urgentQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	pending *sync.Map
}

func (q urgentQueue) Add(r reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, r) }

func (q urgentQueue) AddWithOpts(o priorityqueue.AddOpts, rs ...reconcile.Request) {
	if o.Priority == nil {
		p := priority
		o.Priority = &p
		now := time.Now()
		for _, r := range rs {
			// The first add is when the change was heard: later ones join it.
			q.pending.LoadOrStore(r, now)
		}
	}
	q.PriorityQueue.AddWithOpts(o, rs...)
}

// Reconciler is crossplane-runtime's ratelimiter.NewReconciler(name, r, l),
// with l the global limiter, for every request but urgent ones, which run at
// once (their context marked, WithUrgent, so their requests skip the bound on
// routine requests), and light ones, which draw from a bucket LightShare
// times larger. The global limiter hands out its slots in the order
// reconciles ask for them, and a controller's workers drain a queue
// of 10,000 new resources into slots up to 100 s ahead at the default rate,
// so a change heard meanwhile would wait for all of them whatever its rank in
// the queue. Urgent reconciles come from changes made in the cluster, whose
// rate the limiter is not there to bound; the controller's workers and the
// API server's priority and fairness still do.
//
// light, when not nil, says whether the managed resource of a request is
// Light as the cache holds it. A restart, a resync or a poll reconciles every
// converged resource once, and applying N resources asks for N first
// reconciles: drawn from the global limiter, a restart or a new fleet would
// take at least N divided by the rate, however fast the API server. Light
// ones draw from a bucket of their own instead, so a fleet is not paced by
// the rate (TestNewFleetIsNotPacedByTheRate), and a provider that loops over
// such resources is still bounded, at LightShare times the rate
// (TestLimitedLight); a resource that failed, or that was reconciled and is
// not Ready or not at its spec's generation, takes a global slot.
func (c *Control) Reconciler(name string, r reconcile.Reconciler, light func(context.Context, reconcile.Request) bool) reconcile.Reconciler {
	return &limited{c: c, name: name, inner: r, light: light}
}

type limited struct {
	c     *Control
	name  string
	inner reconcile.Reconciler
	light func(context.Context, reconcile.Request) bool
	// putOff are the requests put off by a limiter: one that comes back
	// was given its slot and runs, as in crossplane-runtime's.
	putOff sync.Map
}

func (l *limited) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := l.c.metrics
	if added, ok := l.c.pending.LoadAndDelete(req); ok {
		start := time.Now()
		if t, ok := added.(time.Time); ok {
			m.urgentWait.WithLabelValues(l.name).Observe(start.Sub(t).Seconds())
		}
		defer func() { m.urgentReconcile.WithLabelValues(l.name).Observe(time.Since(start).Seconds()) }()
		defer l.c.urgent.begin()()
		return l.inner.Reconcile(WithUrgent(ctx), req)
	}
	item := l.name + req.String()
	if _, ok := l.putOff.LoadAndDelete(item); ok {
		return l.inner.Reconcile(ctx, req)
	}
	lim := l.c.global
	if l.light != nil && l.light(ctx, req) {
		lim = l.c.light
	}
	if d := lim.When(item); d > 0 {
		l.putOff.Store(item, struct{}{})
		return reconcile.Result{RequeueAfter: d}, nil
	}
	return l.inner.Reconcile(ctx, req)
}

// Light is whether a reconcile of a managed resource draws from the light
// bucket: the resource is converged (its reconcile is a check) or new (never
// reconciled: no Synced condition, not being deleted). A new resource's first
// reconcile was asked for by its create, a write its author already made at
// the API server; its own requests are bounded in flight (Gate), not by this
// rate. Only its first reconcile is light: once it has failed (Synced False),
// or succeeded without being Ready, its next ones are routine.
func Light(mg resource.Managed) bool {
	if Converged(mg) {
		return true
	}
	// GetCondition returns an Unknown one without a reason when there is none.
	s := mg.GetCondition(xpv2.TypeSynced)
	return mg.GetDeletionTimestamp() == nil && s.Status == corev1.ConditionUnknown && s.Reason == ""
}

// Converged is whether a managed resource as last written has nothing left to
// do: its last reconcile succeeded for its current spec (Synced at its
// generation), it is Ready, and it is neither being deleted nor in the middle
// of a create. A reconcile of such a resource is a check, which writes only
// if something it references changed meanwhile.
func Converged(mg resource.Managed) bool {
	if mg.GetDeletionTimestamp() != nil || meta.ExternalCreateIncomplete(mg) {
		return false
	}
	s, r := mg.GetCondition(xpv2.TypeSynced), mg.GetCondition(xpv2.TypeReady)
	return s.Status == corev1.ConditionTrue && s.ObservedGeneration == mg.GetGeneration() && r.Status == corev1.ConditionTrue
}
