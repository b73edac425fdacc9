package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

func TestConfigRolloutLimitAdmission(t *testing.T) {
	cr := func(name, extra string) string {
		return `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: ` + name + `}, spec: {forProvider: {configMaps: [{name: c}], workloads: [{kind: Deployment, name: d}], ` + extra + `}}}`
	}
	admit(t, map[string]admission{
		"RolloutsZero": {
			reason: "A limit lets a workload roll at least once.",
			yaml:   cr("l1", `rolloutLimit: {rollouts: 0}`),
			want:   "spec.forProvider.rolloutLimit.rollouts in body should be greater than or equal to 1",
		},
		"WindowTooShort": {
			reason: "A window under 10s bounds nothing.",
			yaml:   cr("l2", `rolloutLimit: {within: 5s}`),
			want:   "within must be between 10s and 24h",
		},
		"WindowNotADuration": {
			reason: "The window is a duration, with examples.",
			yaml:   cr("l3", `rolloutLimit: {within: often}`),
			want:   "within is a duration such as 90s, 10m or 1h",
		},
		"Valid": {
			reason: "A limit within bounds is accepted.",
			yaml:   cr("l4", `rolloutLimit: {rollouts: 3, within: 1h}`),
		},
	})
}

// TestConfigRolloutLimitsAFlappingSource rewrites a ConfigMap every 300ms
// for 6s (in make bench-faults: every second for 10 minutes): its Deployment
// rolls as often as the limit allows (2 within 10s), the rollout says it is
// limited with a condition and an event, and once the window lets it, the
// Deployment rolls once more, to the last content.
func TestConfigRolloutLimitsAFlappingSource(t *testing.T) {
	ctx := context.Background()
	flapFor, every, within := 6*time.Second, 300*time.Millisecond, 10*time.Second
	if testenv.FaultScale() > 1 {
		flapFor, every = 10*time.Minute, time.Second
	}
	figures := map[string]float64{"flap_s": flapFor.Seconds(), "every_s": every.Seconds(), "limit": 2, "within_s": within.Seconds()}
	testenv.RecordFault(t, figures)
	ns := env.Namespace(t, "flapping", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "0"}}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "flap", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps:   []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:    []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
			RolloutLimit: &workloadv1alpha1.RolloutLimit{Rollouts: 2, Within: &metav1.Duration{Duration: within}},
		}},
	}
	env.Create(t, cm, consumer(ns, "web", "conf"), cr)
	_, d := rolledTo(t, ns, "flap", "web")
	gen := d.Generation

	start := time.Now()
	changes := 0
	r := &workloadv1alpha1.ConfigRollout{}
	key := types.NamespacedName{Namespace: ns, Name: "flap"}
	// Over a flapping far longer than the window, the rollout is limited and
	// resumed window after window: whether it is limited when the flapping
	// stops depends on where in a window that falls, so it is watched for
	// while the source flaps.
	sawLimited := false
	for i := 1; time.Since(start) < flapFor; i++ {
		env.Update(t, cm, func() { cm.Data["k"] = fmt.Sprint(i) })
		changes++
		if !sawLimited && env.Client.Get(ctx, key, r) == nil {
			sawLimited = limited(r)
		}
		time.Sleep(every)
	}
	figures["changes"] = float64(changes)
	if err := env.Client.Get(ctx, key, r); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	// About 20 changes within the window: two rollouts, and the limit says
	// so. Over longer flapping, two a window at most.
	most := int64(2 * (int(flapFor/within) + 1))
	if flapFor < within {
		most = 2
	}
	figures["rollouts_while_flapping"] = float64(r.Status.AtProvider.Rollouts)
	if n := r.Status.AtProvider.Rollouts; n > most || n < 2 || d.Generation != gen+n {
		t.Errorf("during the flapping: %d rollouts, generation %d → %d; want 2 to %d rollouts, one generation each", n, gen, d.Generation, most)
	}
	rolled := r.Status.AtProvider.Rollouts
	// Within one window (the short version) the flapping always ends limited.
	limitedAtEnd := flapFor < within || limited(r)
	if !sawLimited {
		testenv.Eventually(t, wait, "the Limited phase", func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, key, r)
			return limited(r), err
		})
	}
	if n := eventCount(t, ns, "flap", "RolloutLimited"); n < 1 {
		t.Error("no RolloutLimited event")
	}

	// The window passes: one more rollout, to the last content, and then
	// nothing more.
	// A rollout not limited when the flapping stopped rolled to the last
	// content already, or is about to.
	r, d = rolledTo(t, ns, "flap", "web")
	if n := r.Status.AtProvider.Rollouts; n > rolled+1 || (limitedAtEnd && n != rolled+1) || n < rolled || d.Generation != gen+n {
		t.Errorf("after the window: %d rollouts, generation %d → %d; want %d rollouts (limited when the flapping stopped: %t)", n, gen, d.Generation, rolled+1, limitedAtEnd)
	}
	if n := eventCount(t, ns, "flap", "RolloutResumed"); n < 1 {
		t.Error("no RolloutResumed event")
	}
	// Status keeps the rollouts still within the window, the last one too.
	if w := r.Status.AtProvider.Workloads; len(w) != 1 || len(w[0].RecentRollouts) == 0 || len(w[0].RecentRollouts) > 2 ||
		w[0].LastRollout == nil || !w[0].RecentRollouts[len(w[0].RecentRollouts)-1].Equal(w[0].LastRollout) {
		t.Errorf("status.atProvider.workloads = %+v, want web with its rollouts within the window, ending with its last", w)
	}
}

// limited reports whether rollout r says it is held back by its limit.
func limited(r *workloadv1alpha1.ConfigRollout) bool {
	c := r.GetCondition(workloadv1alpha1.TypeProgressing)
	pr := r.Status.AtProvider.Progress
	return pr != nil && pr.Phase == workloadv1alpha1.PhaseLimited && pr.LimitedUntil != nil && c.Reason == workloadv1alpha1.ReasonRolloutLimitReached
}
