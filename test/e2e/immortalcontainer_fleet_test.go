//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// fleetContainers is how many ImmortalContainers
// TestImmortalContainerFleetConverges creates.
const fleetContainers = 30

// maxReconcilesPerContainer is issue #17's target: an ImmortalContainer
// converges in at most this many reconciles, however often its pod's status
// changes on the way to Running.
const maxReconcilesPerContainer = 3

// TestImmortalContainerFleetConverges creates a fleet of ImmortalContainers
// at once on a control plane where their pods really come up (the scheduler
// binds them, kwok runs them and reports them Ready), counts the
// ImmortalContainer controller's reconciles from before the first create
// until all are Ready, then deletes one pod of the converged fleet and counts
// what its replacement costs.
func TestImmortalContainerFleetConverges(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-immortal-fleet", nil)
	controller := managed.ControllerName(workloadv1alpha1.ImmortalContainerGroupKind)
	count := func() float64 {
		t.Helper()
		n, err := testenv.Reconciles(controller)
		if err != nil {
			t.Fatalf("cannot gather metrics: %v", err)
		}
		return n
	}

	// The containers go while the provider runs, before their namespace (see
	// TestAppBundleFleetConverges).
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.DeleteAllOf(ctx, &workloadv1alpha1.ImmortalContainer{}, client.InNamespace(ns))
		testenv.Eventually(t, 2*time.Minute, "the fleet to be deleted", func(ctx context.Context) (bool, error) {
			l := &workloadv1alpha1.ImmortalContainerList{}
			err := env.Client.List(ctx, l, client.InNamespace(ns))
			return len(l.Items) == 0, err
		})
	})

	testenv.WaitIdle(t, 2*time.Minute)
	before := count()
	requests := env.Requests.Len()
	managerRequests := env.ManagerWrites.Len()
	start := time.Now()
	for i := range fleetContainers {
		ic := &workloadv1alpha1.ImmortalContainer{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ic-%d", i), Namespace: ns},
			Spec:       workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx:1.27"}},
		}
		if err := env.Client.Create(ctx, ic); err != nil {
			t.Fatal(err)
		}
	}
	allReady := func(what string) {
		t.Helper()
		testenv.Eventually(t, 3*time.Minute, what, func(ctx context.Context) (bool, error) {
			l := &workloadv1alpha1.ImmortalContainerList{}
			if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
				return false, err
			}
			ready := 0
			for _, ic := range l.Items {
				if ic.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
					ready++
				}
			}
			if ready < fleetContainers {
				return false, fmt.Errorf("%d of %d Ready", ready, fleetContainers)
			}
			return true, nil
		})
	}
	allReady(fmt.Sprintf("all %d ImmortalContainers to be Ready", fleetContainers))
	toReady := count() - before
	took := time.Since(start)
	byVerb := countByVerb(append(env.Requests.Since(requests), env.ManagerWrites.Since(managerRequests)...), "/namespaces/"+ns+"/")

	// Trailing pod events (kwok's last status write) may still arrive after
	// Ready; they must not reconcile either, so the settled count is
	// asserted too.
	testenv.WaitIdle(t, 2*time.Minute)
	settled := count() - before
	t.Logf("%d ImmortalContainers Ready in %s: %.2f reconciles each to Ready, %.2f once settled; requests each to Ready (provider and its manager, in the namespace): %s",
		fleetContainers, took.Round(time.Millisecond), toReady/fleetContainers, settled/fleetContainers, perBundle(byVerb, fleetContainers))
	if per := toReady / fleetContainers; per > maxReconcilesPerContainer {
		t.Errorf("%.2f reconciles per ImmortalContainer from create to Ready, want at most %d", per, maxReconcilesPerContainer)
	}
	if per := settled / fleetContainers; per > maxReconcilesPerContainer {
		t.Errorf("%.2f reconciles per ImmortalContainer once settled, want at most %d", per, maxReconcilesPerContainer)
	}

	// A replacement is still made on the deletion event, and counted.
	before = count()
	old := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ic-0-immortalpod"}, old); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	ic := &workloadv1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Name: "ic-0", Namespace: ns}}
	next := &corev1.Pod{}
	testenv.Eventually(t, time.Minute, "a new pod to run", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ic-0-immortalpod"}, next)
		return next.UID != old.UID && next.Status.Phase == corev1.PodRunning, err
	})
	starts(t, env, ic, next, 2)
	allReady("the fleet to be Ready again")
	testenv.WaitIdle(t, 2*time.Minute)
	t.Logf("a replaced pod: %.0f reconciles", count()-before)
}
