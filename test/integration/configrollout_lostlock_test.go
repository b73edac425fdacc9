package integration

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

const lockKey = "workload.clusterops.io/config-rollout"

// TestConfigRolloutLostLock rolls a Deployment on a change, then replaces
// it without the rollout's lock (as `kubectl replace`, a GitOps sync with
// Replace or a hand edit do), and without its hash too: the replace rolls
// nothing of the rollout's, the rollout does not take the Deployment for a
// new one to adopt, and the next change rolls it exactly once (its
// generation rises by one) and writes the lock again.
func TestConfigRolloutLostLock(t *testing.T) {
	cases := map[string]struct {
		reason string
		drop   func(d *appsv1.Deployment)
	}{
		"LockDropped": {
			reason: "A replace that keeps the pod template drops the lock alone.",
			drop:   func(d *appsv1.Deployment) { delete(d.Annotations, lockKey) },
		},
		"LockAndHashDropped": {
			reason: "A replace from a manifest that never had either drops the hash from the pod template too: the Deployment rolls by itself on the replace.",
			drop: func(d *appsv1.Deployment) {
				delete(d.Annotations, lockKey)
				delete(d.Spec.Template.Annotations, hashKey)
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			lostLock(t, tc.reason, tc.drop)
		})
	}
}

func lostLock(t *testing.T, reason string, drop func(d *appsv1.Deployment)) {
	t.Helper()
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	ns := env.Namespace(t, "lost-lock", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v1"}}
	cr := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: "follow", Namespace: ns}}
	cr.Spec.ForProvider.ConfigMaps = []workloadv1alpha1.SourceRef{{Name: "conf"}}
	cr.Spec.ForProvider.Workloads = []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}}
	env.Create(t, cm, consumer(ns, "web", "conf"), cr)
	rolledTo(t, ns, "follow", "web")

	// A change rolls it: the lock and the hash are written.
	settled := changed(t, ns, cm, "v2")
	d := deployment(t, ns, "web")
	if d.Annotations[lockKey] != "follow" || d.Spec.Template.Annotations[hashKey] != settled.Status.AtProvider.Hash {
		t.Fatalf("after the first change: annotations %v, template annotations %v, want the lock and hash %s", d.Annotations, d.Spec.Template.Annotations, settled.Status.AtProvider.Hash)
	}

	// The replace, and the reconcile its lock's change brings.
	n, err := testenv.Reconciles(controller)
	if err != nil {
		t.Fatal(err)
	}
	env.Update(t, d, func() { drop(d) })
	testenv.WaitReconciled(t, wait, controller, n)
	replaced := deployment(t, ns, "web")
	r := &workloadv1alpha1.ConfigRollout{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "follow"}, r); err != nil {
		t.Fatal(err)
	}
	if replaced.Generation != d.Generation || baseline(r, "Deployment", "web") != "" {
		t.Errorf("%s\nafter the replace: generation %d, want %d (none of the rollout's); status %+v, want no baseline", reason, replaced.Generation, d.Generation, r.Status.AtProvider.Workloads)
	}

	// The next change rolls it once, and writes the lock again.
	settled = changed(t, ns, cm, "v3")
	got := deployment(t, ns, "web")
	if got.Generation != replaced.Generation+1 {
		t.Errorf("%s\nafter a change: generation %d, want %d: rolled exactly once", reason, got.Generation, replaced.Generation+1)
	}
	if got.Annotations[lockKey] != "follow" || got.Spec.Template.Annotations[hashKey] != settled.Status.AtProvider.Hash {
		t.Errorf("%s\nafter a change: annotations %v, template annotations %v, want the lock written again and hash %s", reason, got.Annotations, got.Spec.Template.Annotations, settled.Status.AtProvider.Hash)
	}
	if b := baseline(settled, "Deployment", "web"); b != "" || settled.Status.AtProvider.Rollouts != 2 {
		t.Errorf("%s\nafter a change: baseline %q, %d rollouts; want it rolled, twice in all", reason, b, settled.Status.AtProvider.Rollouts)
	}
}

// changed sets the ConfigMap's value and waits until the rollout has seen
// the change and settled (Ready at the new hash), and the provider is idle.
func changed(t *testing.T, ns string, cm *corev1.ConfigMap, value string) *workloadv1alpha1.ConfigRollout {
	t.Helper()
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	r := &workloadv1alpha1.ConfigRollout{}
	key := types.NamespacedName{Namespace: ns, Name: "follow"}
	if err := env.Client.Get(context.Background(), key, r); err != nil {
		t.Fatal(err)
	}
	before := r.Status.AtProvider.Hash
	n, err := testenv.Reconciles(controller)
	if err != nil {
		t.Fatal(err)
	}
	env.Update(t, cm, func() { cm.Data["k"] = value })
	testenv.Eventually(t, wait, "the rollout to settle at the change to "+value, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key, r)
		return r.Status.AtProvider.Hash != before && r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, err
	})
	testenv.WaitReconciled(t, wait, controller, n)
	if err := env.Client.Get(context.Background(), key, r); err != nil {
		t.Fatal(err)
	}
	return r
}

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d
}
