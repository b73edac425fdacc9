package chaosagent

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/apimetrics"
)

// metrics are the ChaosAgent metrics of one provider. A nil *metrics (an
// external client built without its controller) records nothing.
type metrics struct {
	// actions counts the actions agents took, dry runs excluded.
	actions *prometheus.CounterVec
	// recovery measures how long workloads took to be whole again after an
	// agent's action: a histogram per workload, so that a team sees which
	// of its services recover quickly. Series exist only for workloads an
	// agent disturbed, and go with the agent.
	recovery *prometheus.HistogramVec
	// unrecovered counts actions a workload did not recover from within the
	// agent's recoveryTimeout.
	unrecovered *prometheus.CounterVec
	// acting is 1 while an agent may act and 0 while it is stopped or
	// paused, by the reason of its Acting condition.
	acting *actingGauge
}

// newMetrics registers the ChaosAgent metrics with reg, or takes those
// already registered there: a test process builds several providers into one
// registry, and a sharded replica builds its share's controllers again if
// they fail.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{}
	var err error
	if m.actions, err = apimetrics.Existing(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clusterops_chaos_actions_total",
		Help: "Actions taken by ChaosAgents (DeletePod, EvictPod, EvictionRefused, ScaleDeployment, RewriteConfigMap), by agent (namespace/name) and the namespace acted in.",
	}, []string{"agent", "action", "namespace"})); err != nil {
		return nil, errors.Wrap(err, errRegister)
	}
	if m.recovery, err = apimetrics.Existing(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "clusterops_chaos_recovery_seconds",
		Help:    "Time a workload (Deployment or StatefulSet) took to have all its desired replicas updated and available again after a ChaosAgent's action, by agent (namespace/name), namespace, kind and workload. Measured at the agent's probes, so late by up to a tenth of its interval (1s to 10s).",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800},
	}, []string{"agent", "namespace", "kind", "workload"})); err != nil {
		return nil, errors.Wrap(err, errRegister)
	}
	if m.unrecovered, err = apimetrics.Existing(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clusterops_chaos_unrecovered_total",
		Help: "Actions of a ChaosAgent that a workload did not recover from within the agent's recoveryTimeout, by agent (namespace/name), namespace, kind and workload.",
	}, []string{"agent", "namespace", "kind", "workload"})); err != nil {
		return nil, errors.Wrap(err, errRegister)
	}
	if m.acting, err = apimetrics.Existing(reg, newActingGauge()); err != nil {
		return nil, errors.Wrap(err, errRegister)
	}
	return m, nil
}

const errRegister = "cannot register the ChaosAgent metrics"

// countAction counts an action of agent in namespace.
func (m *metrics) countAction(agent, action, namespace string) {
	if m == nil {
		return
	}
	m.actions.WithLabelValues(agent, action, namespace).Inc()
}

// recordRecoveries records how workload v came back from agent's actions:
// each recovery's duration, and the actions it did not recover from within
// the agent's recoveryTimeout.
func (m *metrics) recordRecoveries(agent string, v WorkloadRef, recovered []time.Duration, lost int) {
	if m == nil {
		return
	}
	for _, d := range recovered {
		m.recovery.WithLabelValues(agent, v.Namespace, v.Kind, v.Name).Observe(d.Seconds())
	}
	if lost > 0 {
		m.unrecovered.WithLabelValues(agent, v.Namespace, v.Kind, v.Name).Add(float64(lost))
	}
}

// setActing makes reason the one acting series of agent, at v.
func (m *metrics) setActing(agent string, reason xpv2.ConditionReason, v float64) {
	if m == nil {
		return
	}
	m.acting.set(agent, reason, v)
}

// forget removes the recovery and acting series of a deleted agent; its
// action counters stay.
func (m *metrics) forget(ca *v1alpha1.ChaosAgent) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"agent": ca.GetNamespace() + "/" + ca.GetName()}
	m.recovery.DeletePartialMatch(l)
	m.unrecovered.DeletePartialMatch(l)
	m.acting.forget(l["agent"])
}

// actingGauge is the acting gauge with the reason of each agent's one series
// (agent → reason), so that a new reason deletes that series alone:
// DeletePartialMatch scans every series of the metric, too slow to call on
// every reconcile that changes a reason (TestActingSeriesFollowsTheReason).
// The reasons belong to the gauge, not to a provider, so that providers
// sharing a registry share them too.
type actingGauge struct {
	*prometheus.GaugeVec
	mu      sync.Mutex
	reasons map[string]xpv2.ConditionReason
}

func newActingGauge() *actingGauge {
	return &actingGauge{
		GaugeVec: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clusterops_chaos_acting",
			Help: "1 while a ChaosAgent may act, 0 while it is stopped by a kill switch, paused by its steady-state guard or in a quiet window; by agent (namespace/name) and reason (Acting, QuietWindow, StoppedByConfig, StoppedByNamespace, SteadyStateViolated).",
		}, []string{"agent", "reason"}),
		reasons: map[string]xpv2.ConditionReason{},
	}
}

func (g *actingGauge) set(agent string, reason xpv2.ConditionReason, v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev, ok := g.reasons[agent]; ok && prev != reason {
		g.DeleteLabelValues(agent, string(prev))
	}
	g.reasons[agent] = reason
	g.WithLabelValues(agent, string(reason)).Set(v)
}

func (g *actingGauge) forget(agent string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev, ok := g.reasons[agent]; ok {
		g.DeleteLabelValues(agent, string(prev))
		delete(g.reasons, agent)
	}
}
