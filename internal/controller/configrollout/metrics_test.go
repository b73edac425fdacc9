package configrollout

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// TestRolloutMetricsHoldOnlyUnfinishedRollouts: a rollout has one phase
// series while it is unfinished, moving with its phase, and an in-flight
// series while workloads are in flight; none once complete, without
// progress, forgotten, or after forgetAll as the controller stops.
func TestRolloutMetricsHoldOnlyUnfinishedRollouts(t *testing.T) {
	m, err := newRolloutMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	inFlight := func(n int) []v1alpha1.InFlightWorkload { return make([]v1alpha1.InFlightWorkload, n) }
	steps := []struct {
		rollout types.NamespacedName
		pr      *v1alpha1.RolloutProgress
		// phases and inFlight are the series after the step, by rollout name.
		phases   map[string]string
		inFlight map[string]float64
	}{
		{a, &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseRolling, InFlight: inFlight(2)}, map[string]string{"a": v1alpha1.PhaseRolling}, map[string]float64{"a": 2}},
		{b, &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseWaitingForWindow}, map[string]string{"a": v1alpha1.PhaseRolling, "b": v1alpha1.PhaseWaitingForWindow}, map[string]float64{"a": 2}},
		{a, &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseHalted, InFlight: inFlight(1)}, map[string]string{"a": v1alpha1.PhaseHalted, "b": v1alpha1.PhaseWaitingForWindow}, map[string]float64{"a": 1}},
		{a, &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseComplete}, map[string]string{"b": v1alpha1.PhaseWaitingForWindow}, map[string]float64{}},
		{b, nil, map[string]string{}, map[string]float64{}},
		{a, &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseLimited}, map[string]string{"a": v1alpha1.PhaseLimited}, map[string]float64{}},
	}
	for i, s := range steps {
		m.set(s.rollout, s.pr)
		if n := testutil.CollectAndCount(m.phase); n != len(s.phases) {
			t.Errorf("step %d: %d phase series, want %d", i, n, len(s.phases))
		}
		for name, phase := range s.phases {
			if v := testutil.ToFloat64(m.phase.WithLabelValues("ns", name, phase)); v != 1 {
				t.Errorf("step %d: rollout %s in %s is %v, want 1", i, name, phase, v)
			}
		}
		if n := testutil.CollectAndCount(m.inFlight); n != len(s.inFlight) {
			t.Errorf("step %d: %d in-flight series, want %d", i, n, len(s.inFlight))
		}
		for name, v := range s.inFlight {
			if got := testutil.ToFloat64(m.inFlight.WithLabelValues("ns", name)); got != v {
				t.Errorf("step %d: rollout %s has %v in flight, want %v", i, name, got, v)
			}
		}
	}
	m.forgetAll()
	if n := testutil.CollectAndCount(m.phase) + testutil.CollectAndCount(m.inFlight); n != 0 {
		t.Errorf("%d series after forgetAll, want none", n)
	}
	var nilMetrics *rolloutMetrics
	nilMetrics.set(a, &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseHalted})
	nilMetrics.forget(a)
}
