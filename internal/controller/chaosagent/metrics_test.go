package chaosagent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// An agent has one acting series, of its current reason: a new reason
// replaces the old one's series (deleted alone, not by scanning every
// agent's), and deleting the agent removes it.
func TestActingSeriesFollowsTheReason(t *testing.T) {
	ca := &v1alpha1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "metrics-test"}}
	agent := "ns/metrics-test"
	other := "ns/other-agent"
	setActing(other, v1alpha1.ReasonActing, 1)
	base := testutil.CollectAndCount(acting)

	setActing(agent, v1alpha1.ReasonActing, 1)
	setActing(agent, v1alpha1.ReasonQuietWindow, 0)
	if got := testutil.CollectAndCount(acting); got != base+1 {
		t.Errorf("series after a new reason: %d, want %d (one for the agent)", got, base+1)
	}
	if got := testutil.ToFloat64(acting.WithLabelValues(agent, string(v1alpha1.ReasonQuietWindow))); got != 0 {
		t.Errorf("QuietWindow series = %v, want 0", got)
	}
	forgetMetrics(ca)
	if got := testutil.CollectAndCount(acting); got != base {
		t.Errorf("series after the agent was deleted: %d, want %d (the other agent's)", got, base)
	}
	if got := testutil.ToFloat64(acting.WithLabelValues(other, string(v1alpha1.ReasonActing))); got != 1 {
		t.Errorf("another agent's series = %v, want 1 untouched", got)
	}
}
