package flow

import (
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
		return drainedQueue{priorityqueue.New(name, func(po *priorityqueue.Opts[reconcile.Request]) {
			po.Log = log.WithValues("controller", name)
			po.RateLimiter = rl
		})}
	}
	return o
}

// drainedQueue is a priority queue that takes its ready items off before it
// shuts down.
type drainedQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q drainedQueue) ShutDown() {
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

func (q drainedQueue) ShutDownWithDrain() { q.ShutDown() }
