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

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// fleetContainers is how many ImmortalContainers
// TestImmortalContainerFleetConverges creates.
const fleetContainers = 30

// TestImmortalContainerFleetConverges creates a fleet of ImmortalContainers
// at once on a control plane where their pods really come up (the scheduler
// binds them, kwok runs them and reports them Ready), counts the
// ImmortalContainer controller's reconciles from before the first create
// until all are Ready and settled, then deletes one pod of the converged
// fleet and counts what its replacement costs.
func TestImmortalContainerFleetConverges(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-immortal-fleet", nil)
	f := newFleet(t, env, ns, workloadv1alpha1.ImmortalContainerGroupKind, fleetContainers, &workloadv1alpha1.ImmortalContainer{},
		func() client.ObjectList { return &workloadv1alpha1.ImmortalContainerList{} })
	f.begin(t)
	for i := range fleetContainers {
		ic := &workloadv1alpha1.ImmortalContainer{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ic-%d", i), Namespace: ns},
			Spec:       workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx:1.27"}},
		}
		if err := env.Client.Create(ctx, ic); err != nil {
			t.Fatal(err)
		}
	}
	f.converged(t, "ImmortalContainers", true)

	// A replacement is still made on the deletion event, and counted.
	before := f.reconciles(t)
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
	f.allReady(t, "the fleet to be Ready again")
	testenv.WaitIdle(t, 2*time.Minute)
	t.Logf("a replaced pod: %.0f reconciles", f.reconciles(t)-before)
}
