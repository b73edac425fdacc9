package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestConfigRolloutWaveResumes starts the provider on a staggered rollout
// whose status records a wave cut short, as a SIGKILL, a restart or a
// hand-over between the wave's record and the status that ends its
// reconcile leaves it: the wave holds Deployments a and b, a carries the
// wave's hash already, b does not. The new holder rolls b once and a not
// again, starts nothing beyond the wave (a and b are in flight: envtest has
// no Deployment controller), counts a as rolled when the wave was recorded,
// and clears the wave. Then a change rolls a and b once each, recording
// the wave and clearing it in the status that ends that reconcile.
func TestConfigRolloutWaveResumes(t *testing.T) {
	ctx := context.Background()
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	ns := env.Namespace(t, "wave", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v1"}}
	env.Create(t, cm)
	h := configrollout.Combined([]string{configrollout.Hash(configrollout.ConfigMapContent(cm, nil))})
	for _, n := range []string{"a", "b", "c"} {
		d := consumer(ns, n, "conf")
		d.Annotations = map[string]string{lockKey: "waves"}
		d.Spec.Template.Annotations = map[string]string{hashKey: "old"}
		if n == "a" {
			d.Spec.Template.Annotations[hashKey] = h
		}
		env.Create(t, d)
	}
	cr := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: "waves", Namespace: ns, Annotations: map[string]string{meta.AnnotationKeyReconciliationPaused: "true"}}}
	cr.Spec.ForProvider.ConfigMaps = []workloadv1alpha1.SourceRef{{Name: "conf"}}
	cr.Spec.ForProvider.Workloads = []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "a"}, {Kind: "Deployment", Name: "b"}, {Kind: "Deployment", Name: "c"}}
	cr.Spec.ForProvider.Strategy = &workloadv1alpha1.RolloutStrategy{MaxConcurrent: 2}
	env.Create(t, cr)

	// The status the holder that was cut short left.
	at := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	started := metav1.NewTime(at.Add(-time.Second))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "waves"}, cr); err != nil {
			return err
		}
		o := &cr.Status.AtProvider
		o.Hash, o.ChangedAt, o.Workloads = h, &started, nil
		for _, n := range []string{"a", "b", "c"} {
			o.Workloads = append(o.Workloads, workloadv1alpha1.RolledWorkload{Kind: "Deployment", Name: n, Hash: "old"})
		}
		o.Progress = &workloadv1alpha1.RolloutProgress{Hash: h, StartedAt: &started, Phase: workloadv1alpha1.PhaseRolling, Pending: 3}
		o.Wave = &workloadv1alpha1.RolloutWave{Hash: h, At: at, Workloads: []workloadv1alpha1.WaveWorkload{{Kind: "Deployment", Name: "a"}, {Kind: "Deployment", Name: "b"}}}
		return env.Client.Status().Update(ctx, cr)
	})
	if err != nil {
		t.Fatal(err)
	}
	gens := generations(t, ns)

	n, err := testenv.Reconciles(controller)
	if err != nil {
		t.Fatal(err)
	}
	env.Update(t, cr, func() { delete(cr.Annotations, meta.AnnotationKeyReconciliationPaused) })
	testenv.Eventually(t, wait, "the wave to be resumed", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "waves"}, cr)
		return cr.Status.AtProvider.Wave == nil && cr.Status.AtProvider.Rollouts == 2, err
	})
	testenv.WaitReconciled(t, wait, controller, n)
	if got, want := generations(t, ns), []int64{gens[0], gens[1] + 1, gens[2]}; !slices.Equal(got, want) {
		t.Errorf("generations of a, b, c %v, want %v: the wave's b rolled once, a not again, c not before a slot frees", got, want)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "waves"}, cr); err != nil {
		t.Fatal(err)
	}
	if a := cr.Status.AtProvider.Workloads[0]; a.Hash != h || a.LastRollout == nil || !a.LastRollout.Equal(&at) {
		t.Errorf("a recorded as %+v, want hash %s rolled at %s, when the wave was recorded", a, h, at)
	}

	// A change starts a rollout to the new hash: its first wave rolls a and
	// b once each, and c waits for a slot.
	gens = generations(t, ns)
	n, err = testenv.Reconciles(controller)
	if err != nil {
		t.Fatal(err)
	}
	status := "/namespaces/" + ns + "/configrollouts/waves/status"
	writes := len(env.ManagerWrites.Writes(status))
	env.Update(t, cm, func() { cm.Data["k"] = "v2" })
	testenv.Eventually(t, wait, "the next wave", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "waves"}, cr)
		return cr.Status.AtProvider.Hash != h && cr.Status.AtProvider.Rollouts == 4, err
	})
	testenv.WaitReconciled(t, wait, controller, n)
	if got, want := generations(t, ns), []int64{gens[0] + 1, gens[1] + 1, gens[2]}; !slices.Equal(got, want) {
		t.Errorf("after a change: generations of a, b, c %v, want %v: a and b rolled once each", got, want)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "waves"}, cr); err != nil {
		t.Fatal(err)
	}
	// The wave's record and the status that ends its reconcile, at the
	// version the record answered with: neither conflicts, nor is retried.
	if w := env.ManagerWrites.Writes(status)[writes:]; len(w) != 2 {
		t.Errorf("after a change: status writes %v, want 2: the wave's record, then the reconcile's own", w)
	}
	if w := cr.Status.AtProvider.Wave; w != nil {
		t.Errorf("after a change: wave %+v left in status, want it cleared by the status that ended its reconcile", w)
	}
}

// generations are those of Deployments a, b and c of namespace ns.
func generations(t *testing.T, ns string) []int64 {
	t.Helper()
	var out []int64
	for _, n := range []string{"a", "b", "c"} {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: n}, d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Generation)
	}
	return out
}
