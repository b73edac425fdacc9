package chaosagent

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
	"github.com/clusterops/provider-clusterops/internal/target"
)

func TestWholeNeedsEveryReplicaUpdatedAndAvailable(t *testing.T) {
	cases := map[string]struct {
		status WorkloadStatus
		want   bool
	}{
		"Whole":             {status: WorkloadStatus{Kind: kindDeploymentName, Generation: 2, ObservedGeneration: 2, Desired: 3, Replicas: 3, Updated: 3, Available: 3}, want: true},
		"StaleGeneration":   {status: WorkloadStatus{Kind: kindDeploymentName, Generation: 3, ObservedGeneration: 2, Desired: 3, Replicas: 3, Updated: 3, Available: 3}},
		"Unavailable":       {status: WorkloadStatus{Kind: kindDeploymentName, Desired: 3, Replicas: 3, Updated: 3, Available: 2}},
		"SurgeLeftover":     {status: WorkloadStatus{Kind: kindDeploymentName, Desired: 3, Replicas: 4, Updated: 3, Available: 4}},
		"OldTemplate":       {status: WorkloadStatus{Kind: kindDeploymentName, Desired: 3, Replicas: 3, Updated: 2, Available: 3}},
		"StatefulSetUpdate": {status: WorkloadStatus{Kind: kindStatefulSetName, Desired: 3, Replicas: 3, Updated: 0, Available: 3}, want: true},
		"ScaledToZero":      {status: WorkloadStatus{Kind: kindDeploymentName}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Whole(tc.status); got != tc.want {
				t.Errorf("Whole(%+v) = %t, want %t", tc.status, got, tc.want)
			}
		})
	}
}

func TestDeploymentOf(t *testing.T) {
	rs := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, Controller: ptr.To(true)}}
	}
	hash := map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "5d9f7c"}
	cases := map[string]struct {
		owners []metav1.OwnerReference
		labels map[string]string
		want   string
	}{
		"Deployment":    {owners: rs("web-5d9f7c"), labels: hash, want: "web"},
		"DashedName":    {owners: rs("my-web-app-5d9f7c"), labels: hash, want: "my-web-app"},
		"BareRS":        {owners: rs("web"), labels: hash},
		"NoHash":        {owners: rs("web-5d9f7c")},
		"NotController": {owners: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d9f7c"}}, labels: hash},
		"Job":           {owners: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "web-5d9f7c", Controller: ptr.To(true)}}, labels: hash},
		"OnlyHash":      {owners: rs("-5d9f7c"), labels: hash},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := DeploymentOf(tc.owners, tc.labels); got != tc.want {
				t.Errorf("DeploymentOf(...) = %q, want %q", got, tc.want)
			}
		})
	}
	sts := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}
	if got := StatefulSetOf(sts); got != "db" {
		t.Errorf("StatefulSetOf(...) = %q, want db", got)
	}
}

func TestTallyRecoversOrGivesUpOnPendingActions(t *testing.T) {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(d)) }
	micro := func(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(now.Add(d)) }
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	cases := map[string]struct {
		reason        string
		v             v1alpha1.WorkloadVerdict
		whole         bool
		want          v1alpha1.WorkloadVerdict
		wantRecovered []time.Duration
		wantLost      int
	}{
		"StillRecovering": {
			reason: "Not whole within the timeout: still waited for.",
			v:      v1alpha1.WorkloadVerdict{Disruptions: 1, Pending: []metav1.MicroTime{micro(-10 * time.Second)}},
			want:   v1alpha1.WorkloadVerdict{Disruptions: 1, Pending: []metav1.MicroTime{micro(-10 * time.Second)}, Verdict: v1alpha1.VerdictRecovering},
		},
		"Recovered": {
			reason: "Whole again: each pending action yields its own time to recover.",
			v:      v1alpha1.WorkloadVerdict{Disruptions: 2, Pending: []metav1.MicroTime{micro(-10 * time.Second), micro(-4 * time.Second)}},
			whole:  true,
			want: v1alpha1.WorkloadVerdict{
				Disruptions: 2, Recovered: 2, Verdict: v1alpha1.VerdictResilient, LastRecoveryTime: ptr.To(at(0)),
				RecentRecoveries: []metav1.Duration{{Duration: 10 * time.Second}, {Duration: 4 * time.Second}}, P50: dur(4 * time.Second), Max: dur(10 * time.Second),
			},
			wantRecovered: []time.Duration{10 * time.Second, 4 * time.Second},
		},
		"TimedOut": {
			reason:   "Past the timeout the action is unrecovered, whole or not.",
			v:        v1alpha1.WorkloadVerdict{Disruptions: 1, Pending: []metav1.MicroTime{micro(-2 * time.Minute)}},
			whole:    true,
			want:     v1alpha1.WorkloadVerdict{Disruptions: 1, Unrecovered: 1, Verdict: v1alpha1.VerdictUnrecovered, LastUnrecoveredTime: ptr.To(at(0))},
			wantLost: 1,
		},
		"RecentRecoveriesBounded": {
			reason: "Only the latest ten times to recover are kept.",
			v: v1alpha1.WorkloadVerdict{
				Disruptions: 11, Recovered: 10, Pending: []metav1.MicroTime{micro(-time.Second)},
				RecentRecoveries: []metav1.Duration{{Duration: 20}, {Duration: 19}, {Duration: 18}, {Duration: 17}, {Duration: 16}, {Duration: 15}, {Duration: 14}, {Duration: 13}, {Duration: 12}, {Duration: 11}},
			},
			whole: true,
			want: v1alpha1.WorkloadVerdict{
				Disruptions: 11, Recovered: 11, Verdict: v1alpha1.VerdictResilient, LastRecoveryTime: ptr.To(at(0)),
				RecentRecoveries: []metav1.Duration{{Duration: 19}, {Duration: 18}, {Duration: 17}, {Duration: 16}, {Duration: 15}, {Duration: 14}, {Duration: 13}, {Duration: 12}, {Duration: 11}, {Duration: time.Second}},
				P50:              dur(15),
				Max:              dur(time.Second),
			},
			wantRecovered: []time.Duration{time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := tc.v
			recovered, lost := Tally(&v, tc.whole, now, time.Minute)
			if diff := cmp.Diff(tc.want, v); diff != "" {
				t.Errorf("\n%s\nverdict: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff([]any{tc.wantRecovered, tc.wantLost}, []any{recovered, lost}); diff != "" {
				t.Errorf("\n%s\nTally(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDisturbedIsBounded(t *testing.T) {
	var vs []v1alpha1.WorkloadVerdict
	for i := range maxVerdicts + 5 {
		vs = Disturbed(vs, WorkloadRef{Kind: kindDeploymentName, Namespace: "apps", Name: string(rune('a' + i))}, now.Add(time.Duration(i)*time.Second))
	}
	if len(vs) != maxVerdicts {
		t.Fatalf("len(verdicts) = %d, want %d", len(vs), maxVerdicts)
	}
	// Every verdict waits, so the ones disturbed longest ago went.
	if vs[0].Name != "f" {
		t.Errorf("first verdict = %s, want f: a to e were displaced", vs[0].Name)
	}
	// One that is not waited for goes before older ones that are.
	vs[10].Pending = nil
	vs = Disturbed(vs, WorkloadRef{Kind: kindDeploymentName, Namespace: "apps", Name: "new"}, now.Add(time.Hour))
	for _, v := range vs {
		if v.Name == string(rune('a'+15)) {
			t.Errorf("the settled verdict was kept over ones still waited for")
		}
	}
	for range maxPending + 3 {
		vs = Disturbed(vs, WorkloadRef{Kind: kindDeploymentName, Namespace: "apps", Name: "new"}, now.Add(time.Hour))
	}
	last := vs[len(vs)-1]
	if len(last.Pending) != maxPending || last.Disruptions != maxPending+4 {
		t.Errorf("pending %d, disruptions %d, want %d and %d", len(last.Pending), last.Disruptions, maxPending, maxPending+4)
	}
}

// TestRecoveryMeasured: a pod of a Deployment killed by a round leaves a
// pending verdict; probes see it recover and report the time it took.
func TestRecoveryMeasured(t *testing.T) {
	ctx := context.Background()
	clock := now
	ca := agent(func(ca *v1alpha1.ChaosAgent) {
		ca.Spec.ForProvider.TantrumMode = true
		ca.Spec.ForProvider.RespectDisruptionBudgets = ptr.To(false)
	})
	d := deployment("apps", "web", 2)
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	d.Generation, d.Status = 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "apps", Name: "web-5d9f7c-x", Labels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "5d9f7c"},
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d9f7c", UID: "rs", Controller: ptr.To(true)}},
		CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
	}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	e, c := newExternal(t, d, p)
	e.now = func() time.Time { return clock }
	if _, err := e.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	vs := ca.Status.AtProvider.Verdicts
	if len(vs) != 1 || vs[0].Name != "web" || vs[0].Verdict != v1alpha1.VerdictRecovering {
		t.Fatalf("verdicts = %+v, want web recovering", vs)
	}
	setAvailable := func(n int32) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			t.Fatal(err)
		}
		d.Status.AvailableReplicas = n
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	setAvailable(1)
	clock = now.Add(3 * time.Second)
	if err := e.probe(ctx, ca, mustCompile(t, ca)); err != nil {
		t.Fatal(err)
	}
	if v := ca.Status.AtProvider.Verdicts[0]; v.Verdict != v1alpha1.VerdictRecovering {
		t.Fatalf("verdict = %+v, want still recovering with one replica unavailable", v)
	}
	setAvailable(2)
	clock = now.Add(7 * time.Second)
	if err := e.probe(ctx, ca, mustCompile(t, ca)); err != nil {
		t.Fatal(err)
	}
	v := ca.Status.AtProvider.Verdicts[0]
	if v.Verdict != v1alpha1.VerdictResilient || v.P50 == nil || v.P50.Duration != 7*time.Second || v.Recovered != 1 {
		t.Errorf("verdict = %+v, want resilient after 7s", v)
	}
}

// TestProbeReadsNothingInADeniedNamespace: a recovery waited for in a
// namespace denied since the round is no longer waited for, and the
// workload there is not read.
func TestProbeReadsNothingInADeniedNamespace(t *testing.T) {
	ctx := context.Background()
	ca := agent(func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.TantrumMode = true })
	ca.Status.AtProvider.Verdicts = Disturbed(nil, WorkloadRef{Kind: kindDeploymentName, Namespace: "apps", Name: "web"}, now)
	d := deployment("apps", "web", 2)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(d).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			t.Errorf("read %T %s in a denied namespace", obj, key)
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	e, _ := newExternal(t)
	e.cluster = &target.Cluster{Client: c, Local: true, Reach: reach.Policy{Config: "test", OwnNamespace: true, ProviderNamespace: "crossplane-system", Denied: []string{"apps"}}}
	if err := e.probe(ctx, ca, mustCompile(t, ca)); err != nil {
		t.Fatal(err)
	}
	if v := ca.Status.AtProvider.Verdicts[0]; len(v.Pending) > 0 {
		t.Errorf("verdict = %+v, want no longer waited for", v)
	}
}

func mustCompile(t *testing.T, ca *v1alpha1.ChaosAgent) Spec {
	t.Helper()
	s, err := Compile(ca.Spec.ForProvider)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestProbeEvery(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{time.Second: time.Second, 30 * time.Second: 3 * time.Second, time.Hour: 10 * time.Second} {
		if got := ProbeEvery(in); got != want {
			t.Errorf("ProbeEvery(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestPollWhileRecovering: while a recovery is waited for, the agent is
// looked at every probe interval, not only at its next round.
func TestPollWhileRecovering(t *testing.T) {
	hook := untilNextRound(func() time.Time { return now })
	next := metav1.NewTime(now.Add(time.Minute))
	ca := agent(func(ca *v1alpha1.ChaosAgent) { ca.Status.AtProvider.NextRoundTime = &next })
	if got := hook(ca, time.Hour); got != time.Minute {
		t.Errorf("poll without a pending recovery = %s, want the next round in 1m", got)
	}
	ca.Status.AtProvider.Verdicts = Disturbed(nil, WorkloadRef{Kind: kindDeploymentName, Namespace: "apps", Name: "web"}, now)
	if got := hook(ca, time.Hour); got != 6*time.Second {
		t.Errorf("poll while a recovery is pending = %s, want a tenth of the 1m interval", got)
	}
}
