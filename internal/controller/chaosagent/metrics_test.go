package chaosagent

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// An agent has one acting series, of its current reason: a new reason
// replaces the old one's series (deleted alone, not by scanning every
// agent's), and deleting the agent removes it.
func TestActingSeriesFollowsTheReason(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ca := &v1alpha1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "metrics-test"}}
	agent := "ns/metrics-test"
	other := "ns/other-agent"
	m.setActing(other, v1alpha1.ReasonActing, 1)

	m.setActing(agent, v1alpha1.ReasonActing, 1)
	m.setActing(agent, v1alpha1.ReasonQuietWindow, 0)
	if got := testutil.CollectAndCount(m.acting); got != 2 {
		t.Errorf("series after a new reason: %d, want 2 (one for each agent)", got)
	}
	if got := testutil.ToFloat64(m.acting.WithLabelValues(agent, string(v1alpha1.ReasonQuietWindow))); got != 0 {
		t.Errorf("QuietWindow series = %v, want 0", got)
	}
	m.forget(ca)
	if got := testutil.CollectAndCount(m.acting); got != 1 {
		t.Errorf("series after the agent was deleted: %d, want 1 (the other agent's)", got)
	}
	if got := testutil.ToFloat64(m.acting.WithLabelValues(other, string(v1alpha1.ReasonActing))); got != 1 {
		t.Errorf("another agent's series = %v, want 1 untouched", got)
	}
}

// Providers that share a registry share its ChaosAgent metrics, the reasons
// of the acting series included, and register nothing twice; each metric
// keeps its name and labels.
func TestMetricsOfOneRegistryAreShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newMetrics(reg)
	if err != nil {
		t.Fatalf("second provider on the same registry: %v", err)
	}
	w := WorkloadRef{Kind: "Deployment", Namespace: "shop", Name: "web"}
	a.countAction("shop/edmund", v1alpha1.ActionEvictPod, "shop")
	b.countAction("shop/edmund", v1alpha1.ActionEvictPod, "shop")
	a.recordRecoveries("shop/edmund", w, []time.Duration{3 * time.Second}, 1)
	a.setActing("shop/edmund", v1alpha1.ReasonActing, 1)
	b.setActing("shop/edmund", v1alpha1.ReasonQuietWindow, 0)
	want := `
# HELP clusterops_chaos_acting 1 while a ChaosAgent may act, 0 while it is stopped by a kill switch, paused by its steady-state guard or in a quiet window; by agent (namespace/name) and reason (Acting, QuietWindow, StoppedByConfig, StoppedByNamespace, SteadyStateViolated).
# TYPE clusterops_chaos_acting gauge
clusterops_chaos_acting{agent="shop/edmund",reason="QuietWindow"} 0
# HELP clusterops_chaos_actions_total Actions taken by ChaosAgents (DeletePod, EvictPod, EvictionRefused, ScaleDeployment, RewriteConfigMap), by agent (namespace/name) and the namespace acted in.
# TYPE clusterops_chaos_actions_total counter
clusterops_chaos_actions_total{action="EvictPod",agent="shop/edmund",namespace="shop"} 2
# HELP clusterops_chaos_unrecovered_total Actions of a ChaosAgent that a workload did not recover from within the agent's recoveryTimeout, by agent (namespace/name), namespace, kind and workload.
# TYPE clusterops_chaos_unrecovered_total counter
clusterops_chaos_unrecovered_total{agent="shop/edmund",kind="Deployment",namespace="shop",workload="web"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "clusterops_chaos_acting", "clusterops_chaos_actions_total", "clusterops_chaos_unrecovered_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(a.recovery, "clusterops_chaos_recovery_seconds"); got != 1 {
		t.Errorf("recovery series: %d, want 1", got)
	}
}
