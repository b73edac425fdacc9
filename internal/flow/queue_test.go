package flow

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// depthOf sums controller-runtime's workqueue_depth gauge of the queue
// named name, over its priorities.
func depthOf(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "workqueue_depth" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					sum += m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// TestQueueShutDownLeavesNoDepth: a queue that shuts down with items ready,
// as a replica's share stops, leaves nothing in workqueue_depth for the
// queue built again under its name, and the new queue counts from zero.
func TestQueueShutDownLeavesNoDepth(t *testing.T) {
	const name = "test-queue-shutdown"
	newQueue := WithQueue(controller.Options{}, logr.Discard()).NewQueue
	for round := range 2 {
		q := newQueue(name, workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		for i := range 100 {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}})
		}
		// One taken and being worked on when the queue shuts down.
		r, _ := q.Get()
		if d := depthOf(t, name); d != 99 {
			t.Fatalf("round %d: depth %v before the shutdown, want 99", round, d)
		}
		q.ShutDown()
		q.Done(r)
		if d := depthOf(t, name); d != 0 {
			t.Errorf("round %d: depth %v after the shutdown, want 0", round, d)
		}
	}
}

// TestQueueAddedToWhileShuttingDownLeavesNoDepth: an event handler that
// keeps adding while the queue shuts down leaves nothing in the gauge.
func TestQueueAddedToWhileShuttingDownLeavesNoDepth(t *testing.T) {
	const name = "test-queue-shutdown-adding"
	q := WithQueue(controller.Options{}, logr.Discard()).NewQueue(name, workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}})
		}
	}()
	time.Sleep(10 * time.Millisecond)
	q.ShutDown()
	close(stop)
	<-stopped
	if d := depthOf(t, name); d != 0 {
		t.Errorf("depth %v after the shutdown, want 0", d)
	}
}
