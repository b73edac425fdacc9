package configrollout

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// strategyClient is an external client on a fake cluster with ConfigMap conf
// and rolled-out Deployments a, b and c that read it, at a clock the test moves.
func strategyClient(t *testing.T, clock *time.Time) (*external, client.Client) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "conf"}, Data: map[string]string{"k": "v"}}}
	for _, n := range []string{"a", "b", "c"} {
		objs = append(objs, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n, Generation: 1},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1},
		})
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&appsv1.Deployment{}).Build()
	return &external{cluster: &target.Cluster{ID: "test", Client: c}, record: event.NewNopRecorder(), now: func() time.Time { return *clock }}, c
}

// hashes are the hashes a, b and c carry.
func hashes(t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	for _, n := range []string{"a", "b", "c"} {
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: n}, d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Spec.Template.Annotations[AnnotationHash])
	}
	return out
}

// TestStaggeredReconciles walks a rollout of three Deployments one at a time
// through Observe and Update: one rolls, the rest wait for it, it halts past
// the deadline, resumes once the workload has rolled out, and a window holds it.
func TestStaggeredReconciles(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	e, c := strategyClient(t, &clock)
	cr := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	cr.Spec.ForProvider = v1alpha1.ConfigRolloutParameters{
		ConfigMaps: []v1alpha1.SourceRef{{Name: "conf"}},
		Workloads:  []v1alpha1.WorkloadRef{{Kind: KindDeployment, Name: "a"}, {Kind: KindDeployment, Name: "b"}, {Kind: KindDeployment, Name: "c"}},
		Strategy:   &v1alpha1.RolloutStrategy{MaxConcurrent: 1, ProgressDeadline: &metav1.Duration{Duration: time.Minute}},
		// The first wave rolls the workloads it starts to follow.
		RollOnAdoption: true,
	}
	reconcile := func() bool {
		t.Helper()
		o, err := e.Observe(ctx, cr)
		if err != nil {
			t.Fatal(err)
		}
		if !o.ResourceUpToDate {
			if _, err := e.Update(ctx, cr); err != nil {
				t.Fatal(err)
			}
		}
		return !o.ResourceUpToDate
	}
	rollOut := func(name string) {
		t.Helper()
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, d); err != nil {
			t.Fatal(err)
		}
		d.Status.ObservedGeneration = d.Generation
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// unroll makes the fake's Deployments look like their controller has
	// not seen the rollout yet (the fake does not bump generations on
	// template changes the way the API server does).
	unroll := func(name string) {
		t.Helper()
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, d); err != nil {
			t.Fatal(err)
		}
		d.Status.ObservedGeneration = d.Generation - 1
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	step := func(what string, wantUpdate bool, wantPhase string, wantCarry []bool) {
		t.Helper()
		if got := reconcile(); got != wantUpdate {
			t.Errorf("%s: updated %t, want %t", what, got, wantUpdate)
		}
		h := cr.Status.AtProvider.Hash
		var carry []bool
		for _, x := range hashes(t, c) {
			carry = append(carry, x == h)
		}
		if diff := cmp.Diff(wantCarry, carry); diff != "" {
			t.Errorf("%s: carries the hash: -want, +got:\n%s", what, diff)
		}
		if p := cr.Status.AtProvider.Progress; p == nil || p.Phase != wantPhase {
			t.Errorf("%s: progress %+v, want phase %s", what, p, wantPhase)
		}
	}

	step("first wave", true, v1alpha1.PhaseRolling, []bool{true, false, false})
	unroll("a")
	clock = clock.Add(10 * time.Second)
	step("a in flight", false, v1alpha1.PhaseRolling, []bool{true, false, false})
	if c := cr.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionFalse {
		t.Errorf("Ready %s while b and c wait, want False", c.Status)
	}
	clock = clock.Add(time.Minute)
	step("a past its deadline", false, v1alpha1.PhaseHalted, []bool{true, false, false})
	if c := cr.GetCondition(v1alpha1.TypeProgressing); c.Reason != v1alpha1.ReasonProgressDeadlineExceeded {
		t.Errorf("Progressing %+v, want ProgressDeadlineExceeded", c)
	}
	rollOut("a")
	step("a rolled out", true, v1alpha1.PhaseRolling, []bool{true, true, false})
	unroll("b")
	rollOut("b")
	// A window that closed an hour ago holds c back.
	cr.Spec.ForProvider.Windows = []apisv1alpha1.TimeWindow{{Start: clock.Add(-2 * time.Hour).Format("15:04"), End: clock.Add(-time.Hour).Format("15:04")}}
	step("outside the window", false, v1alpha1.PhaseWaitingForWindow, []bool{true, true, false})
	if u := cr.Status.AtProvider.Progress.WaitingUntil; u == nil || u.Sub(clock) < 21*time.Hour {
		t.Errorf("waitingUntil %v, want the window's next opening, tomorrow", u)
	}
	if due, ok := progressDue(cr, clock); !ok || !due.Equal(cr.Status.AtProvider.Progress.WaitingUntil.Time) {
		t.Errorf("progressDue = %s, %t; want the window's opening", due, ok)
	}
	cr.Spec.ForProvider.Windows = nil
	step("window gone", true, v1alpha1.PhaseRolling, []bool{true, true, true})
	step("c in flight (the fake does not bump its generation: rolled out)", false, v1alpha1.PhaseComplete, []bool{true, true, true})
	if cr.Status.AtProvider.Rollouts != 3 {
		t.Errorf("rollouts %d, want 3", cr.Status.AtProvider.Rollouts)
	}
}

func TestProgressDue(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	strategy := &v1alpha1.RolloutStrategy{MaxConcurrent: 2, ProgressDeadline: &metav1.Duration{Duration: time.Minute}}
	in := func(ago time.Duration) v1alpha1.InFlightWorkload {
		return v1alpha1.InFlightWorkload{Kind: KindDeployment, Name: "x", Since: metav1.NewTime(now.Add(-ago))}
	}
	open := metav1.NewTime(now.Add(time.Hour))
	cases := map[string]struct {
		reason string
		p      *v1alpha1.RolloutProgress
		want   time.Time
		due    bool
	}{
		"NoProgress":   {reason: "Without a strategy or windows nothing is due."},
		"Complete":     {reason: "A complete rollout waits for events.", p: &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseComplete}},
		"Halted":       {reason: "A halted rollout waits for events.", p: &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseHalted, InFlight: []v1alpha1.InFlightWorkload{in(time.Hour)}}},
		"Window":       {reason: "A rollout outside its windows looks again when one opens.", p: &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseWaitingForWindow, WaitingUntil: &open}, want: open.Time, due: true},
		"Recheck":      {reason: "An in-flight workload far from its deadline is looked at within recheck.", p: &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseRolling, InFlight: []v1alpha1.InFlightWorkload{in(0)}}, want: now.Add(recheck), due: true},
		"Deadline":     {reason: "An in-flight workload whose deadline is sooner is looked at then.", p: &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseRolling, InFlight: []v1alpha1.InFlightWorkload{in(0), in(55 * time.Second)}}, want: now.Add(5 * time.Second), due: true},
		"NoneInFlight": {reason: "Rolling with nothing in flight waits for Update's requeue.", p: &v1alpha1.RolloutProgress{Phase: v1alpha1.PhaseRolling}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cr := &v1alpha1.ConfigRollout{}
			cr.Spec.ForProvider.Strategy = strategy
			cr.Status.AtProvider.Progress = tc.p
			got, due := progressDue(cr, now)
			if due != tc.due || !got.Equal(tc.want) {
				t.Errorf("\n%s\nprogressDue(...) = %s, %t; want %s, %t", tc.reason, got, due, tc.want, tc.due)
			}
		})
	}
}

// TestUntilDueDebounce checks the poll hook of a rollout that a debounce
// window held back: the reconcile that rolls is due when the window closes,
// and at once when it closed after Observe decided to wait.
func TestUntilDueDebounce(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	const poll = time.Minute
	cases := map[string]struct {
		reason  string
		changed time.Time
		ready   xpv2.Condition
		want    time.Duration
	}{
		"Open": {
			reason:  "A window still open brings the reconcile forward to its end.",
			changed: now.Add(-20 * time.Second),
			ready:   debouncing(),
			want:    10 * time.Second,
		},
		"ClosedSinceObserve": {
			reason:  "A window that closed after Observe held the workloads back is due at once, not at the poll.",
			changed: now.Add(-31 * time.Second),
			ready:   debouncing(),
			want:    10 * time.Millisecond,
		},
		"Rolled": {
			reason:  "Once nothing is held back, a closed window brings nothing forward.",
			changed: now.Add(-31 * time.Second),
			ready:   xpv2.Available(),
			want:    poll,
		},
		"OtherReason": {
			reason:  "A rollout not Ready for another reason waits for the poll, or it would loop.",
			changed: now.Add(-31 * time.Second),
			ready:   xpv2.Unavailable().WithMessage("Deployment api does not exist"),
			want:    poll,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cr := &v1alpha1.ConfigRollout{}
			cr.Spec.ForProvider.Debounce = &metav1.Duration{Duration: 30 * time.Second}
			cr.Status.AtProvider.ChangedAt = &metav1.Time{Time: tc.changed}
			cr.SetConditions(tc.ready)
			if got := untilDue(func() time.Time { return now })(cr, poll); got != tc.want {
				t.Errorf("\n%s\nuntilDue(...) = %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
}

// debouncing is the Ready condition of a rollout a debounce window holds back.
func debouncing() xpv2.Condition {
	c := xpv2.Unavailable()
	c.Reason = v1alpha1.ReasonDebouncing
	return c
}

// TestWaitingTable checks the table that routes in-flight workloads' status
// events: the wave Update rolls is in it before its status events come (its
// own patch's event is not heard), it holds only the rollouts' in-flight
// workloads, and a rollout that is gone leaves it at its next event.
func TestWaitingTable(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	e, _ := strategyClient(t, &clock)
	e.cluster.Local = true
	e.waiting = newWaiters()
	cr := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	cr.Spec.ForProvider = v1alpha1.ConfigRolloutParameters{
		ConfigMaps: []v1alpha1.SourceRef{{Name: "conf"}},
		Workloads:  []v1alpha1.WorkloadRef{{Kind: KindDeployment, Name: "a"}, {Kind: KindDeployment, Name: "b"}, {Kind: KindDeployment, Name: "c"}},
		Strategy:   &v1alpha1.RolloutStrategy{MaxConcurrent: 2, ProgressDeadline: &metav1.Duration{Duration: time.Minute}},
		// The first wave rolls the workloads it starts to follow.
		RollOnAdoption: true,
	}
	waitedFor := func() map[string][]string {
		out := map[string][]string{}
		for _, n := range []string{"a", "b", "c"} {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}}
			if rs := e.waiting.rollouts(KindDeployment, d); len(rs) > 0 {
				out[n] = rs
			}
		}
		return out
	}
	if _, err := e.Observe(ctx, cr); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{}, waitedFor()); diff != "" {
		t.Errorf("before the first wave: -want, +got:\n%s", diff)
	}
	if _, err := e.Update(ctx, cr); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"a": {"r"}, "b": {"r"}}, waitedFor()); diff != "" {
		t.Errorf("after the first wave: -want, +got:\n%s", diff)
	}

	// The rollout is gone (deleted under the Orphan policy, never observed
	// again): the next status event of a drops it, and queues nothing.
	s := runtime.NewScheme()
	if err := v1alpha1.SchemeBuilder.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	h, _ := e.waiting.watch(KindDeployment, fake.NewClientBuilder().WithScheme(s).Build())
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	h.Update(ctx, ctrlevent.UpdateEvent{ObjectOld: d, ObjectNew: d}, q)
	if diff := cmp.Diff(map[string][]string{}, waitedFor()); diff != "" {
		t.Errorf("after the rollout is gone: -want, +got:\n%s", diff)
	}
	if len(e.waiting.by) != 0 || len(e.waiting.forRollout) != 0 {
		t.Errorf("table holds %v and %v, want nothing", e.waiting.by, e.waiting.forRollout)
	}
	if q.Len() != 0 {
		t.Errorf("%d requests queued for a rollout that is gone", q.Len())
	}
}
