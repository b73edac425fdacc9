package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Reconciles is how many reconciles the in-process provider's controller has
// finished, whatever their result (controller_runtime_reconcile_total, summed
// over its results). Controller names are managed.ControllerName(GroupKind).
func Reconciles(controller string) (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum, nil
}

// WaitReconciled waits until the controller has finished more than after
// reconciles and then the provider is idle (WaitIdle), and returns how many
// it has finished by then. A test that asserts that something did not happen
// after an event calls it first: the reconcile the event caused has run to
// its end, so "nothing was written" is an observation of that reconcile, not
// of a quiet moment.
func WaitReconciled(t testing.TB, timeout time.Duration, controller string, after float64) float64 {
	t.Helper()
	Eventually(t, timeout, "a reconcile of "+controller, func(context.Context) (bool, error) {
		n, err := Reconciles(controller)
		if err != nil {
			return false, err
		}
		if n <= after {
			return false, fmt.Errorf("%v reconciles, waiting for more than %v", n, after)
		}
		return true, nil
	})
	WaitIdle(t, timeout)
	n, err := Reconciles(controller)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
