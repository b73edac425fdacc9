package configrollout

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// statusOn is a status writer on a control plane that holds cr, counting
// its writes.
func statusOn(t *testing.T, cr *v1alpha1.ConfigRollout) (client.Client, *int) {
	t.Helper()
	writes := new(int)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(cr).WithStatusSubresource(cr).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
			*writes++
			return c.SubResource(sub).Update(ctx, o, opts...)
		},
	}).Build()
	return c, writes
}

// TestIntendRecordsAWaveBeforeRollingIt: a wave is recorded in status, at the resourceVersion the
// reconcile read, before any workload is written; a reconcile that read an
// older version rolls nothing; a wave recorded already is not recorded
// again; the status that ends the reconcile clears it.
func TestIntendRecordsAWaveBeforeRollingIt(t *testing.T) {
	wave := &v1alpha1.RolloutWave{Hash: allHash(), At: metav1.NewTime(testNow.Add(-time.Minute)), Workloads: []v1alpha1.WaveWorkload{{Kind: KindDeployment, Name: "api"}}}
	type want struct {
		err          bool
		carried      string
		rollWrites   int
		statusWrites int
		stored       *v1alpha1.RolloutWave
	}
	cases := map[string]struct {
		reason string
		stored *v1alpha1.RolloutWave // the wave the stored rollout records
		stale  bool                  // the reconcile read an older version
		want   want
	}{
		"Records": {
			reason: "The wave is recorded, then rolled, then cleared in memory for the reconcile's own status update.",
			want:   want{carried: allHash(), rollWrites: 1, statusWrites: 1, stored: &v1alpha1.RolloutWave{Hash: allHash(), At: metav1.NewTime(testNow), Workloads: wave.Workloads}},
		},
		"Stale": {
			reason: "A reconcile that read the rollout before another wave was recorded meets a conflict and rolls nothing.",
			stale:  true,
			// The one status write is the attempt that conflicts.
			want: want{err: true, carried: "old", statusWrites: 1, stored: nil},
		},
		"Resumed": {
			reason: "A wave cut short is rolled without being recorded again.",
			stored: wave,
			want:   want{carried: allHash(), rollWrites: 1, stored: wave},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cr := rollout()
			cr.Status.AtProvider.Wave = tc.stored
			kube, statusWrites := statusOn(t, cr.DeepCopy())
			if err := kube.Get(context.Background(), types.NamespacedName{Namespace: testNamespace, Name: "conf"}, cr); err != nil {
				t.Fatal(err)
			}
			if tc.stale {
				stored := cr.DeepCopy()
				stored.Status.AtProvider.Rollouts = 7
				if err := kube.Status().Update(context.Background(), stored); err != nil {
					t.Fatal(err)
				}
				*statusWrites = 0
			}
			e, c, writes := newExternal(t, configMap(), deployment("api", "old", "conf"))
			e.status = kube.Status()
			if _, err := e.Observe(context.Background(), cr); err != nil {
				t.Fatal(err)
			}
			_, err := e.Update(context.Background(), cr)
			stored := &v1alpha1.ConfigRollout{}
			if err := kube.Get(context.Background(), types.NamespacedName{Namespace: testNamespace, Name: "conf"}, stored); err != nil {
				t.Fatal(err)
			}
			h, _ := carried(t, c, KindDeployment, "api")
			got := want{err: err != nil, carried: h, rollWrites: *writes, statusWrites: *statusWrites, stored: stored.Status.AtProvider.Wave}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nUpdate(...): -want, +got:\n%s", tc.reason, diff)
			}
			if err == nil && cr.Status.AtProvider.Wave != nil {
				t.Errorf("\n%s\nUpdate(...) left wave %+v for the reconcile's status update, want it cleared", tc.reason, cr.Status.AtProvider.Wave)
			}
			if err == nil && cr.GetResourceVersion() != stored.GetResourceVersion() {
				t.Errorf("\n%s\nUpdate(...) left resourceVersion %s, want the stored %s: the reconcile's own status update would conflict", tc.reason, cr.GetResourceVersion(), stored.GetResourceVersion())
			}
		})
	}
}

// TestResumeWave: a staggered rollout whose wave was cut short after it
// rolled one of its two workloads rolls the other, and nothing beyond the
// wave, though a slot is free; the one rolled counts as rolled when the
// wave was recorded.
func TestResumeWave(t *testing.T) {
	t.Run("WindowOpen", func(t *testing.T) { resumeWave(t, false) })
	// A wave recorded before a rollout window shut waits for it to open
	// again, recorded still.
	t.Run("WindowShut", func(t *testing.T) { resumeWave(t, true) })
}

func resumeWave(t *testing.T, shut bool) {
	t.Helper()
	ctx := context.Background()
	clock := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	e, c := strategyClient(t, &clock)
	cm := ConfigMapContent(mustConfigMap(t, c), nil)
	h := Combined([]string{Hash(cm)})
	at := metav1.NewTime(clock.Add(-time.Minute))
	for _, n := range []string{"a", "b", "c"} {
		hash := "old"
		if n == "a" {
			hash = h
		}
		patchTemplate(t, c, n, hash, "r")
	}
	cr := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	cr.Spec.ForProvider = v1alpha1.ConfigRolloutParameters{
		ConfigMaps: []v1alpha1.SourceRef{{Name: "conf"}},
		Workloads:  []v1alpha1.WorkloadRef{{Kind: KindDeployment, Name: "a"}, {Kind: KindDeployment, Name: "b"}, {Kind: KindDeployment, Name: "c"}},
		Strategy:   &v1alpha1.RolloutStrategy{MaxConcurrent: 2, ProgressDeadline: &metav1.Duration{Duration: time.Hour}},
	}
	if shut {
		cr.Spec.ForProvider.Windows = []apisv1alpha1.TimeWindow{{Start: clock.Add(-2 * time.Hour).Format("15:04"), End: clock.Add(-time.Hour).Format("15:04")}}
	}
	o := &cr.Status.AtProvider
	o.Hash, o.ChangedAt = h, &at
	for _, n := range []string{"a", "b", "c"} {
		o.Workloads = append(o.Workloads, v1alpha1.RolledWorkload{Kind: KindDeployment, Name: n, Hash: "old"})
	}
	started := metav1.NewTime(at.Add(-time.Second))
	o.Progress = &v1alpha1.RolloutProgress{Hash: h, StartedAt: &started, Phase: v1alpha1.PhaseRolling}
	o.Wave = &v1alpha1.RolloutWave{Hash: h, At: at, Workloads: []v1alpha1.WaveWorkload{{Kind: KindDeployment, Name: "a"}, {Kind: KindDeployment, Name: "b"}}}
	kube, statusWrites := statusOn(t, cr.DeepCopy())
	e.status = kube.Status()
	if err := kube.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "r"}, cr); err != nil {
		t.Fatal(err)
	}

	obs, err := e.Observe(ctx, cr)
	if err != nil {
		t.Fatal(err)
	}
	if shut {
		if !obs.ResourceUpToDate {
			if _, err := e.Update(ctx, cr); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff([]string{h, "old", "old"}, hashes(t, c)); diff != "" || o.Wave == nil {
			t.Errorf("hashes of a, b, c with the window shut: nothing rolls, the wave stays recorded (%+v): -want, +got:\n%s", o.Wave, diff)
		}
		return
	}
	if obs.ResourceUpToDate {
		t.Fatal("Observe(...): up to date, want b to roll")
	}
	if _, err := e.Update(ctx, cr); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{h, h, "old"}, hashes(t, c)); diff != "" {
		t.Errorf("hashes of a, b, c: the wave's b rolls, c waits for the next wave: -want, +got:\n%s", diff)
	}
	if *statusWrites != 0 || o.Wave != nil {
		t.Errorf("%d status writes, wave %+v: want none, the wave recorded already, and cleared once rolled", *statusWrites, o.Wave)
	}
	if a := o.Workloads[0]; a.LastRollout == nil || !a.LastRollout.Equal(&at) || o.Rollouts != 2 {
		t.Errorf("a last rolled at %v, %d rollouts: want a rolled when the wave was recorded (%s), and a and b counted", a.LastRollout, o.Rollouts, at)
	}
}

// TestKeepWave: a recorded wave stays while a workload of it is to roll,
// and goes once none is, or once the configuration changed again.
func TestKeepWave(t *testing.T) {
	wave := &v1alpha1.RolloutWave{Hash: "h", Workloads: []v1alpha1.WaveWorkload{{Kind: KindDeployment, Name: "a"}, {Kind: KindDeployment, Name: "b", Hash: "keys"}}}
	cases := map[string]struct {
		reason  string
		hash    string
		pending map[string]bool
		keep    bool
	}{
		"ToRoll":     {reason: "A workload of the wave is still to roll.", hash: "h", pending: map[string]bool{"Deployment/b": true}, keep: true},
		"Rolled":     {reason: "Every workload of the wave carries its hash.", hash: "h", pending: map[string]bool{"Deployment/c": true}},
		"Superseded": {reason: "The configuration changed since: the next wave rolls to the new hash.", hash: "new", pending: map[string]bool{"Deployment/a": true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := &v1alpha1.ConfigRolloutObservation{Hash: tc.hash, Wave: wave.DeepCopy()}
			keepWave(o, tc.pending)
			if got := o.Wave != nil; got != tc.keep {
				t.Errorf("\n%s\nkeepWave(...) kept the wave: %t, want %t", tc.reason, got, tc.keep)
			}
		})
	}
}

// mustConfigMap is ConfigMap conf of namespace ns.
func mustConfigMap(t *testing.T, c client.Client) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "conf"}, cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// patchTemplate makes Deployment name of namespace ns carry hash and the
// lock of rollout lock.
func patchTemplate(t *testing.T, c client.Client, name, hash, lock string) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, d); err != nil {
		t.Fatal(err)
	}
	d.Annotations = map[string]string{AnnotationLock: lock}
	d.Spec.Template.Annotations = map[string]string{AnnotationHash: hash}
	if err := c.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}
