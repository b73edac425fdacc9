package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// rolloutPhases are the phases clusterops_configrollout_phase holds of the
// rollout ns/name, from the in-process provider's metrics.
func rolloutPhases(t *testing.T, ns, name string) []string {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != "clusterops_configrollout_phase" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] == ns && l["name"] == name && m.GetGauge().GetValue() == 1 {
				out = append(out, l["phase"])
			}
		}
	}
	return out
}

// TestConfigRolloutPhaseMetricNamesTheRollout: a rollout held outside its
// window has one series in clusterops_configrollout_phase, naming it and
// its phase, which an alert or a dashboard reads; the series goes with the
// rollout.
func TestConfigRolloutPhaseMetricNamesTheRollout(t *testing.T) {
	ns := env.Namespace(t, "rollout-metrics", nil)
	ctx := context.Background()
	now := time.Now().UTC()
	hhmm := func(t time.Time) string { return t.Format("15:04") }
	closed := apisv1alpha1.TimeWindow{Start: hhmm(now.Add(2 * time.Hour)), End: hhmm(now.Add(3 * time.Hour)), TimeZone: "UTC"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "0"}}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
			Windows:    []apisv1alpha1.TimeWindow{closed},
		}},
	}
	for _, o := range []client.Object{cm, consumer(ns, "web", "conf"), cr} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	phaseIs := func(want workloadv1alpha1.RolloutProgress) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			got := &workloadv1alpha1.ConfigRollout{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
				return false, err
			}
			p := got.Status.AtProvider.Progress
			return p != nil && p.Phase == want.Phase, nil
		}
	}
	testenv.Eventually(t, wait, "the rollout to follow its workload", phaseIs(workloadv1alpha1.RolloutProgress{Phase: workloadv1alpha1.PhaseComplete}))
	if p := rolloutPhases(t, ns, "nightly"); len(p) != 0 {
		t.Errorf("a complete rollout has phase series %v, want none", p)
	}
	// A change outside the window waits for it.
	cm.Data["k"] = "1"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the change to wait for the window", phaseIs(workloadv1alpha1.RolloutProgress{Phase: workloadv1alpha1.PhaseWaitingForWindow}))
	testenv.Eventually(t, wait, "the phase series of the waiting rollout", func(context.Context) (bool, error) {
		if p := rolloutPhases(t, ns, "nightly"); len(p) != 1 || p[0] != workloadv1alpha1.PhaseWaitingForWindow {
			return false, fmt.Errorf("phase series %v", p)
		}
		return true, nil
	})
	if err := env.Client.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the rollout gone, with its series", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nightly"}, &workloadv1alpha1.ConfigRollout{})
		return apierrors.IsNotFound(err) && len(rolloutPhases(t, ns, "nightly")) == 0, nil
	})
}
