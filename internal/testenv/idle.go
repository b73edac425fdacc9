package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// WaitIdle waits until the in-process provider's controllers have nothing
// queued and nothing in progress, three polls in a row: what a test that
// counts the work an event causes must see before it makes the event. Without
// it, work queued at a lower priority (a watch's initial list) may still run
// after an urgent repair the test waited for, and be counted.
func WaitIdle(t testing.TB, timeout time.Duration) {
	t.Helper()
	quiet := 0
	Eventually(t, timeout, "the provider's controllers to be idle", func(context.Context) (bool, error) {
		busy, err := busyWork()
		if err != nil {
			return false, err
		}
		if busy > 0 {
			quiet = 0
			return false, fmt.Errorf("%v queued or in progress", busy)
		}
		quiet++
		return quiet >= 3, nil
	})
}

// busyWork sums the queue depth and the active workers of every controller
// in controller-runtime's registry.
func busyWork() (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, f := range families {
		if n := f.GetName(); n != "workqueue_depth" && n != "controller_runtime_active_workers" {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetGauge().GetValue()
		}
	}
	return sum, nil
}
