package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

func TestConfigRolloutStrategyAdmission(t *testing.T) {
	cr := func(name, extra string) string {
		return `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: ` + name + `}, spec: {forProvider: {configMaps: [{name: c}], workloads: [{kind: Deployment, name: d}], ` + extra + `}}}`
	}
	admit(t, map[string]admission{
		"MaxConcurrentZero": {
			reason: "At least one workload rolls at a time.",
			yaml:   cr("s1", `strategy: {maxConcurrent: 0}`),
			want:   "spec.forProvider.strategy.maxConcurrent: Invalid value: 0: spec.forProvider.strategy.maxConcurrent in body should be greater than or equal to 1",
		},
		"DeadlineTooShort": {
			reason: "A deadline under 10s would halt every rollout.",
			yaml:   cr("s2", `strategy: {progressDeadline: 5s}`),
			want:   "progressDeadline must be between 10s and 24h",
		},
		"DeadlineTooLong": {
			reason: "A deadline over a day is no deadline.",
			yaml:   cr("s3", `strategy: {progressDeadline: 25h}`),
			want:   "progressDeadline must be between 10s and 24h",
		},
		"DeadlineNotADuration": {
			reason: "The deadline is a duration, with examples.",
			yaml:   cr("s4", `strategy: {progressDeadline: soon}`),
			want:   "progressDeadline is a duration such as 90s, 10m or 1h",
		},
		"WindowBadTime": {
			reason: "Window times are HH:MM, read like ChaosAgent's quiet windows.",
			yaml:   cr("s5", `windows: [{start: "9am", end: "17:00"}]`),
			want:   `spec.forProvider.windows[0]: Invalid value: start and end are times of day as HH:MM`,
		},
		"WindowBadDay": {
			reason: "Window days are weekday names.",
			yaml:   cr("s6", `windows: [{days: [Funday], start: "09:00", end: "17:00"}]`),
			want:   `Unsupported value: "Funday"`,
		},
		"WindowBadTimeZone": {
			reason: "A window's time zone is an IANA name.",
			yaml:   cr("s7", `windows: [{start: "09:00", end: "17:00", timeZone: "UTC+2 hours"}]`),
			want:   "timeZone is an IANA time zone such as UTC or Europe/Berlin",
		},
		"Valid": {
			reason: "A strategy and windows together are accepted.",
			yaml:   cr("s8", `strategy: {maxConcurrent: 2, progressDeadline: 90s}, windows: [{days: [Mon, Tuesday], start: "22:00", end: "06:00", timeZone: Europe/Berlin}]`),
		},
		"DefaultsOnly": {
			reason: "An empty strategy takes its defaults (one at a time, 10m).",
			yaml:   cr("s9", `strategy: {}`),
		},
	})
	// The defaults are what the field docs say.
	r := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: env.Namespace(t, "strategy-defaults", nil)},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "c"}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "d"}},
			Strategy:   &workloadv1alpha1.RolloutStrategy{},
		}},
	}
	env.Create(t, r)
	if s := r.Spec.ForProvider.Strategy; s.MaxConcurrent != 1 || s.ProgressDeadline == nil || s.ProgressDeadline.Duration != 10*time.Minute {
		t.Errorf("strategy defaults = %+v, want maxConcurrent 1, progressDeadline 10m", s)
	}
}

// settle makes Deployment name look rolled out and available, as its
// controller would (envtest runs none).
func settle(t *testing.T, ns, name string) {
	t.Helper()
	d := &appsv1.Deployment{}
	testenv.Eventually(t, wait, "Deployment "+name+" to settle", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return false, err
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		return true, env.Client.Status().Update(ctx, d)
	})
}

// carries reports the hash each Deployment's pod template carries.
func carries(ctx context.Context, ns string, names ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, d); err != nil {
			return nil, err
		}
		out[n] = d.Spec.Template.Annotations[hashKey]
	}
	return out, nil
}

func eventCount(t *testing.T, ns, object, reason string) int32 {
	t.Helper()
	events := &corev1.EventList{}
	if err := env.Client.List(context.Background(), events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := int32(0)
	for _, e := range events.Items {
		if e.InvolvedObject.Name == object && e.Reason == reason {
			n += e.Count
		}
	}
	return n
}

// TestConfigRolloutStaggered rolls three Deployments it starts to follow,
// with rollOnAdoption, one at a time: the next only once the one before is
// available, a halt when one is not within the deadline, and a resume when
// it becomes available.
func TestConfigRolloutStaggered(t *testing.T) {
	ns := env.Namespace(t, "stagger", nil)
	names := []string{"d1", "d2", "d3"}
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v"}})
	var refs []workloadv1alpha1.WorkloadRef
	for _, n := range names {
		env.Create(t, consumer(ns, n, "conf"))
		settle(t, ns, n)
		refs = append(refs, workloadv1alpha1.WorkloadRef{Kind: "Deployment", Name: n})
	}
	env.Create(t, &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "waves", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  refs,
			Strategy:   &workloadv1alpha1.RolloutStrategy{MaxConcurrent: 1, ProgressDeadline: &metav1.Duration{Duration: 10 * time.Second}},
			// Running workloads roll as the rollout starts to follow them,
			// under the strategy: the explicit opt-in.
			RollOnAdoption: true,
		}},
	})
	r := &workloadv1alpha1.ConfigRollout{}
	// progress waits until status shows phase with inFlight and pending, and
	// the Deployments carry the hash exactly as rolled says.
	progress := func(what, phase string, inFlight []string, pending int64, rolled ...string) {
		t.Helper()
		testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "waves"}, r); err != nil {
				return false, err
			}
			p := r.Status.AtProvider.Progress
			if p == nil || p.Phase != phase || p.Pending != pending || len(p.InFlight) != len(inFlight) {
				return false, nil
			}
			for i, w := range p.InFlight {
				if w.Name != inFlight[i] {
					return false, nil
				}
			}
			got, err := carries(ctx, ns, names...)
			if err != nil {
				return false, err
			}
			want := map[string]bool{}
			for _, n := range rolled {
				want[n] = true
			}
			for _, n := range names {
				if (got[n] == r.Status.AtProvider.Hash) != want[n] {
					return false, fmt.Errorf("%s carries %q, rolled %t: want rolled %t (hash %s)", n, got[n], got[n] == r.Status.AtProvider.Hash, want[n], r.Status.AtProvider.Hash)
				}
			}
			return true, nil
		})
	}
	// One at a time: d1 rolls, d2 and d3 wait for it.
	progress("d1 in flight", workloadv1alpha1.PhaseRolling, []string{"d1"}, 2, "d1")
	if c := r.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionFalse {
		t.Errorf("Ready = %s while rolling, want False", c.Status)
	}
	// promptly fails when what follows a workload settling waited for the
	// next poll (15s, or the progress deadline: 10s here; meant for workloads
	// on other clusters), not for the workload's status event on the
	// metadata watch (about a second: events are gathered for coalesce).
	promptly := func(what string, since time.Time) {
		t.Helper()
		if took := time.Since(since); took > 6*time.Second {
			t.Errorf("%s %s after the workload settled: at the recheck poll, not at its status event", what, took.Round(time.Second))
		}
	}
	// d1's status event rolls d2.
	settled := time.Now()
	settle(t, ns, "d1")
	progress("d2 in flight", workloadv1alpha1.PhaseRolling, []string{"d2"}, 1, "d1", "d2")
	promptly("d2 rolled", settled)
	// d2 never becomes available: after 10s the rollout halts, d3 stays.
	progress("the rollout to halt on d2", workloadv1alpha1.PhaseHalted, []string{"d2"}, 1, "d1", "d2")
	c := r.GetCondition(workloadv1alpha1.TypeProgressing)
	if c.Status != corev1.ConditionFalse || c.Reason != workloadv1alpha1.ReasonProgressDeadlineExceeded {
		t.Errorf("Progressing = %s/%s %q, want False/ProgressDeadlineExceeded", c.Status, c.Reason, c.Message)
	}
	if r.Status.AtProvider.Progress.Halted == "" {
		t.Errorf("status.atProvider.progress.halted is empty while halted")
	}
	testenv.Eventually(t, wait, "a RolloutHalted event", func(context.Context) (bool, error) {
		return eventCount(t, ns, "waves", "RolloutHalted") == 1, nil
	})
	// d2 becomes available: the rollout resumes with d3, then completes.
	settle(t, ns, "d2")
	progress("d3 in flight", workloadv1alpha1.PhaseRolling, []string{"d3"}, 0, "d1", "d2", "d3")
	// d3 rolled in the reconcile that resumed: its status event completes
	// the rollout.
	settled = time.Now()
	settle(t, ns, "d3")
	progress("the rollout to complete", workloadv1alpha1.PhaseComplete, nil, 0, "d1", "d2", "d3")
	promptly("the rollout completed", settled)
	if n := eventCount(t, ns, "waves", "RolloutResumed"); n != 1 {
		t.Errorf("%d RolloutResumed events, want 1", n)
	}
	if r.Status.AtProvider.Rollouts != 3 || r.Status.AtProvider.Progress.Rolled != 3 {
		t.Errorf("rollouts %d, rolled %d: want 3 and 3", r.Status.AtProvider.Rollouts, r.Status.AtProvider.Progress.Rolled)
	}
	for _, n := range names {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: n}, d); err != nil {
			t.Fatal(err)
		}
		if d.Generation != 2 {
			t.Errorf("Deployment %s at generation %d, want 2: rolled exactly once", n, d.Generation)
		}
	}
}

// TestConfigRolloutWindows holds changes outside the rollout window and rolls
// them once, to the latest content, when a window opens.
func TestConfigRolloutWindows(t *testing.T) {
	ns := env.Namespace(t, "windows", nil)
	now := time.Now().UTC()
	hhmm := func(t time.Time) string { return t.Format("15:04") }
	// A window that opens in two hours, for an hour: closed now.
	closed := apisv1alpha1.TimeWindow{Start: hhmm(now.Add(2 * time.Hour)), End: hhmm(now.Add(3 * time.Hour)), TimeZone: "UTC"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "0"}}
	env.Create(t, cm, consumer(ns, "web", "conf"))
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
			Windows:    []apisv1alpha1.TimeWindow{closed},
		}},
	}
	env.Create(t, cr)
	// Followed, not rolled: the window has nothing to hold back yet.
	r, d := rolledTo(t, ns, "nightly", "web")
	gen := d.Generation
	if p := r.Status.AtProvider.Progress; p == nil || p.Phase != workloadv1alpha1.PhaseComplete || p.Pending != 0 || gen != 1 {
		t.Fatalf("progress %+v, generation %d: want Complete with nothing pending, generation 1", p, gen)
	}
	waiting := func(what string) {
		t.Helper()
		testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nightly"}, cr); err != nil {
				return false, err
			}
			p := cr.Status.AtProvider.Progress
			c := cr.GetCondition(workloadv1alpha1.TypeProgressing)
			return p != nil && p.Phase == workloadv1alpha1.PhaseWaitingForWindow && p.Pending == 1 && p.Hash == cr.Status.AtProvider.Hash &&
				c.Reason == workloadv1alpha1.ReasonOutsideWindow && cr.GetCondition(xpv2.TypeReady).Status == corev1.ConditionFalse, nil
		})
	}
	// Three changes outside the window: one rollout waiting, to the latest
	// content.
	for i, v := range []string{"1", "2", "3"} {
		prev := cr.Status.AtProvider.Hash
		env.Update(t, cm, func() { cm.Data["k"] = v })
		testenv.Eventually(t, wait, "the new hash", func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nightly"}, cr)
			return cr.Status.AtProvider.Hash != prev, err
		})
		waiting("the change to wait for the window")
		if u := cr.Status.AtProvider.Progress.WaitingUntil; i == 0 && (u == nil || u.Sub(now) < 110*time.Minute || u.Sub(now) > 130*time.Minute) {
			t.Errorf("waitingUntil = %v, want about two hours from %s", u, now)
		}
	}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if h := d.Spec.Template.Annotations[hashKey]; h != "" || d.Generation != gen {
		t.Fatalf("rolled outside the window: hash %q", h)
	}
	// The window opens (it now holds the present): one rollout.
	env.Update(t, cr, func() {
		cr.Spec.ForProvider.Windows = []apisv1alpha1.TimeWindow{{Start: hhmm(now.Add(-time.Hour)), End: hhmm(now.Add(time.Hour))}}
	})
	r, d = rolledTo(t, ns, "nightly", "web")
	if r.Status.AtProvider.Rollouts != 1 || d.Generation != gen+1 {
		t.Errorf("rollouts %d, generation %d → %d: want one rollout for the three changes", r.Status.AtProvider.Rollouts, gen, d.Generation)
	}
	if p := r.Status.AtProvider.Progress; p == nil || p.Phase != workloadv1alpha1.PhaseComplete || p.WaitingUntil != nil {
		t.Errorf("progress = %+v, want Complete", p)
	}
	if n := eventCount(t, ns, "nightly", "WaitingForWindow"); n < 1 {
		t.Errorf("no WaitingForWindow event")
	}
}
