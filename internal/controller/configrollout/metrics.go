package configrollout

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/apimetrics"
)

// rolloutMetrics say, of each staggered, windowed or limited rollout that is
// not complete, its phase and how many of its workloads are in flight. A
// rollout has series only while it is unfinished, so the gauges hold as many
// as there are rollouts under way, halted or held back, none for a fleet at
// rest: an alert on them names the rollout (ClusteropsRolloutHalted).
type rolloutMetrics struct {
	phase    *prometheus.GaugeVec
	inFlight *prometheus.GaugeVec

	mu sync.Mutex
	// phases are the phase each rollout with series has them for.
	phases map[types.NamespacedName]string
}

func newRolloutMetrics(reg prometheus.Registerer) (*rolloutMetrics, error) {
	phase, err := apimetrics.Existing(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clusterops_configrollout_phase",
		Help: "1 for the phase a staggered, windowed or limited ConfigRollout is in (Rolling, Halted, WaitingForWindow, Limited); a rollout has a series only while it is not Complete.",
	}, []string{"namespace", "name", "phase"}))
	if err != nil {
		return nil, errors.Wrap(err, "cannot register the ConfigRollout metrics")
	}
	inFlight, err := apimetrics.Existing(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clusterops_configrollout_in_flight_workloads",
		Help: "Workloads a staggered ConfigRollout rolled that are not available yet (its wave in flight); a rollout has a series only while it has some.",
	}, []string{"namespace", "name"}))
	return &rolloutMetrics{phase: phase, inFlight: inFlight, phases: map[types.NamespacedName]string{}}, errors.Wrap(err, "cannot register the ConfigRollout metrics")
}

// set records rollout's progress; nil or complete forgets it. A nil
// rolloutMetrics (a client built without its controller) records nothing.
func (m *rolloutMetrics) set(rollout types.NamespacedName, pr *v1alpha1.RolloutProgress) {
	if m == nil {
		return
	}
	if pr == nil || pr.Phase == v1alpha1.PhaseComplete {
		m.forget(rollout)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if was, ok := m.phases[rollout]; ok && was != pr.Phase {
		m.phase.DeleteLabelValues(rollout.Namespace, rollout.Name, was)
	}
	m.phases[rollout] = pr.Phase
	m.phase.WithLabelValues(rollout.Namespace, rollout.Name, pr.Phase).Set(1)
	if n := len(pr.InFlight); n > 0 {
		m.inFlight.WithLabelValues(rollout.Namespace, rollout.Name).Set(float64(n))
	} else {
		m.inFlight.DeleteLabelValues(rollout.Namespace, rollout.Name)
	}
}

// forget removes rollout's series: it completed, has no strategy any more,
// or is gone.
func (m *rolloutMetrics) forget(rollout types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetLocked(rollout)
}

func (m *rolloutMetrics) forgetLocked(rollout types.NamespacedName) {
	if was, ok := m.phases[rollout]; ok {
		m.phase.DeleteLabelValues(rollout.Namespace, rollout.Name, was)
		delete(m.phases, rollout)
	}
	m.inFlight.DeleteLabelValues(rollout.Namespace, rollout.Name)
}

// forgetAll removes every rollout's series: the controller stopped, and its
// rollouts are another controller's, here or on another replica.
func (m *rolloutMetrics) forgetAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for r := range m.phases {
		m.forgetLocked(r)
	}
}
