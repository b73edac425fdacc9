//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestImmortalContainerOnLocalControlPlane runs the provider against the local
// control plane, where the scheduler and kwok run pods: the ImmortalContainer
// becomes Ready, and a deleted pod is replaced and runs again.
func TestImmortalContainerOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-immortal", nil)
	ic := &workloadv1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx:1.27"}},
	}
	if err := env.Client.Create(ctx, ic); err != nil {
		t.Fatal(err)
	}
	ready := func(what string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, what, func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, ic)
			return ic.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, err
		})
	}
	ready("the ImmortalContainer to be Ready with its pod running")

	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-immortalpod"}, pod); err != nil {
		t.Fatal(err)
	}
	starts(t, env, ic, pod, 1)
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	next := &corev1.Pod{}
	testenv.Eventually(t, time.Minute, "a new pod to run", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-immortalpod"}, next)
		return next.UID != pod.UID && next.Status.Phase == corev1.PodRunning, err
	})
	starts(t, env, ic, next, 2)
	ready("the ImmortalContainer to be Ready again")
	if ic.Status.AtProvider.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", ic.Status.AtProvider.Restarts)
	}

	if err := env.Client.Delete(ctx, ic); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the ImmortalContainer and its pod to be gone", func(ctx context.Context) (bool, error) {
		errIC := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, ic)
		errPod := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-immortalpod"}, &corev1.Pod{})
		return kerrors.IsNotFound(errIC) && kerrors.IsNotFound(errPod), nil
	})
}

// starts waits for ic's status to count n starts, the newest of them pod, with
// one creation timestamp per start (n is below the bound of 10), newest last.
func starts(t *testing.T, env *testenv.Env, ic *workloadv1alpha1.ImmortalContainer, pod *corev1.Pod, n int64) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("status.atProvider to count %d starts, the last pod %s", n, pod.UID), func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ic), ic)
		o := ic.Status.AtProvider
		return o.PodUID == string(pod.UID) && o.StartTimes == n, err
	})
	o := ic.Status.AtProvider
	if len(o.StartTimestamps) != int(n) || !o.StartTimestamps[n-1].Equal(&pod.CreationTimestamp) {
		t.Errorf("startTimestamps = %v, want %d of them, the last %s", o.StartTimestamps, n, pod.CreationTimestamp)
	}
}

var (
	startOnce sync.Once
	started   *testenv.Env
	startErr  error
)

// provider installs the CRDs and the default ClusterProviderConfig on the
// cluster of $KUBECONFIG and runs the provider's controllers in-process, once
// for all tests of the package (controller names are unique per process).
func provider(t *testing.T) *testenv.Env {
	t.Helper()
	newClient(t) // Fails clearly when KUBECONFIG is unusable.
	startOnce.Do(func() {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			startErr = err
			return
		}
		if started, startErr = testenv.ForCluster(cfg); startErr == nil {
			startErr = started.StartProvider(context.Background(), time.Hour, 50)
		}
	})
	if startErr != nil {
		t.Fatal(startErr)
	}
	return started
}
