package flow

import (
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// drainWait bounds how long a queue that shuts down takes its ready items
// off: each is a Get and a Done, microseconds, so a queue of 10,000 takes
// milliseconds. A worker that takes the last one first leaves the drain
// waiting for an item that does not come; the shutdown then ends the wait.
const drainWait = time.Second

// WithQueue sets o's NewQueue to controller-runtime's priority queue, as it
// builds by default, whose ready items are taken off when it shuts down.
//
// controller-runtime's workqueue_depth gauge counts an item from its add to
// its get. A queue that shuts down with items ready leaves them in the gauge
// for good, under the controller's name: a replica's share, stopped and built
// again with the same controllers (a replica joined or left), would show them
// as a depth that never drains, and an alert on the depth would fire on it.
// TestQueueShutDownLeavesNoDepth holds this.
func WithQueue(o controller.Options, log logr.Logger) controller.Options {
	o.NewQueue = func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return &drainedQueue{PriorityQueue: priorityqueue.New(name, func(po *priorityqueue.Opts[reconcile.Request]) {
			po.Log = log.WithValues("controller", name)
			po.RateLimiter = rl
		})}
	}
	return o
}

// drainedQueue is a priority queue that takes its ready items off before it
// shuts down. From then on it takes no new item: an event handler or a
// worker that adds one while the drain runs would otherwise put it back in
// the gauge after the drain saw the queue empty.
type drainedQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	closing atomic.Bool
}

func (q *drainedQueue) ShutDown() {
	q.closing.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for q.Len() > 0 {
			r, _, shutdown := q.GetWithPriority()
			if shutdown {
				return
			}
			q.Done(r)
		}
	}()
	select {
	case <-done:
	case <-time.After(drainWait):
	}
	q.PriorityQueue.ShutDown()
}

func (q *drainedQueue) ShutDownWithDrain() { q.ShutDown() }

func (q *drainedQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if !q.closing.Load() {
		q.PriorityQueue.AddWithOpts(o, items...)
	}
}

func (q *drainedQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q *drainedQueue) AddAfter(item reconcile.Request, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

func (q *drainedQueue) AddRateLimited(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}
