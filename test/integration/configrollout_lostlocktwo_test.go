package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestConfigRolloutLostLockOfTwo: two rollouts of a namespace select one
// Deployment, and the first rolled it. A replace drops its lock: the second
// does not take the Deployment as a baseline in that window, since the
// first's status records it as rolled (indexFollowing, SlimRollout), and
// the next change of what both read rolls it exactly once (its generation
// rises by one), by the first, which writes its lock again. The second
// reads one more ConfigMap, so had both rolled it they would have written
// different hashes, two generations.
func TestConfigRolloutLostLockOfTwo(t *testing.T) {
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	ns := env.Namespace(t, "lost-lock-two", nil)
	conf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v1"}}
	extra := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extra", Namespace: ns}, Data: map[string]string{"k": "x"}}
	rollout := func(name string, sources ...string) *workloadv1alpha1.ConfigRollout {
		cr := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		for _, s := range sources {
			cr.Spec.ForProvider.ConfigMaps = append(cr.Spec.ForProvider.ConfigMaps, workloadv1alpha1.SourceRef{Name: s})
		}
		cr.Spec.ForProvider.Workloads = []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}}
		return cr
	}
	env.Create(t, conf, extra, consumer(ns, "web", "conf"), rollout("first", "conf"))
	rolledTo(t, ns, "first", "web")
	settledAt(t, ns, "first", conf, "v2")
	if d := deployment(t, ns, "web"); d.Annotations[lockKey] != "first" {
		t.Fatalf("after the first change: lock %q, want first's", d.Annotations[lockKey])
	}

	// The second finds the lock, and leaves the Deployment alone.
	env.Create(t, rollout("second", "conf", "extra"))
	followsFirst := func(ctx context.Context) (bool, error) {
		r := &workloadv1alpha1.ConfigRollout{}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "second"}, r)
		return strings.Contains(r.GetCondition(xpv2.TypeReady).Message, `follows ConfigRollout "first"`), err
	}
	testenv.Eventually(t, wait, "the second rollout to find web the first's", followsFirst)

	// The replace drops the lock; the reconciles of both rollouts that its
	// event brings run to their end.
	d := deployment(t, ns, "web")
	n, err := testenv.Reconciles(controller)
	if err != nil {
		t.Fatal(err)
	}
	env.Update(t, d, func() { delete(d.Annotations, lockKey) })
	testenv.WaitReconciled(t, wait, controller, n)
	second := &workloadv1alpha1.ConfigRollout{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "second"}, second); err != nil {
		t.Fatal(err)
	}
	if len(second.Status.AtProvider.Workloads) != 0 {
		t.Errorf("after the lock was lost the second rollout records %+v, want nothing: web is the first's", second.Status.AtProvider.Workloads)
	}
	if ok, _ := followsFirst(context.Background()); !ok {
		t.Errorf("after the lock was lost the second rollout is %+v, want it to say web follows the first", second.GetCondition(xpv2.TypeReady))
	}
	replaced := deployment(t, ns, "web")

	// The next change rolls it once, by the first.
	first := settledAt(t, ns, "first", conf, "v3")
	got := deployment(t, ns, "web")
	if got.Generation != replaced.Generation+1 {
		t.Errorf("after a change: generation %d, want %d: rolled exactly once", got.Generation, replaced.Generation+1)
	}
	if got.Annotations[lockKey] != "first" || got.Spec.Template.Annotations[hashKey] != first.Status.AtProvider.Hash {
		t.Errorf("after a change: lock %q, hash %q; want the first's lock written again and its hash %s", got.Annotations[lockKey], got.Spec.Template.Annotations[hashKey], first.Status.AtProvider.Hash)
	}
}

// settledAt sets ConfigMap cm's key k to value and waits until rollout name
// has seen the change and settled (Ready at the new hash), and the provider
// is idle.
func settledAt(t *testing.T, ns, name string, cm *corev1.ConfigMap, value string) *workloadv1alpha1.ConfigRollout {
	t.Helper()
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	r := &workloadv1alpha1.ConfigRollout{}
	key := types.NamespacedName{Namespace: ns, Name: name}
	if err := env.Client.Get(context.Background(), key, r); err != nil {
		t.Fatal(err)
	}
	before := r.Status.AtProvider.Hash
	n, err := testenv.Reconciles(controller)
	if err != nil {
		t.Fatal(err)
	}
	env.Update(t, cm, func() { cm.Data["k"] = value })
	testenv.Eventually(t, wait, "rollout "+name+" to settle at the change to "+value, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key, r)
		return r.Status.AtProvider.Hash != before && r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, err
	})
	testenv.WaitReconciled(t, wait, controller, n)
	if err := env.Client.Get(context.Background(), key, r); err != nil {
		t.Fatal(err)
	}
	return r
}
