package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

func immortal(ns, name string) *workloadv1alpha1.ImmortalContainer {
	return &workloadv1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx:1.27"}},
	}
}

// podAfter waits for the ImmortalContainer's pod to exist with a UID other
// than previous, and returns it.
func podAfter(t *testing.T, ns, name string, previous types.UID) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	testenv.Eventually(t, wait, "pod "+name+"-immortalpod to be (re)created", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-immortalpod"}, pod)
		return pod.UID != previous && pod.DeletionTimestamp == nil, err
	})
	return pod
}

func TestImmortalContainerRecreatesItsPod(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "immortal", nil)
	ic := immortal(ns, "web")
	if err := env.Client.Create(ctx, ic); err != nil {
		t.Fatal(err)
	}
	pod := podAfter(t, ns, "web", "")
	if got := pod.Spec.Containers[0].Image; got != "nginx:1.27" {
		t.Errorf("pod image = %q, want nginx:1.27", got)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].Name != "web" {
		t.Errorf("pod owner references = %v, want the ImmortalContainer", pod.OwnerReferences)
	}
	testenv.Eventually(t, wait, "status.atProvider to name the pod", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, ic)
		return ic.Status.AtProvider.CurrentPod == "web-immortalpod" && len(ic.Status.AtProvider.StartTimes) == 1, err
	})

	// Deleted: recreated on the watch event (the poll interval is an hour).
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod = podAfter(t, ns, "web", pod.UID)

	// Ended: replaced.
	pod.Status.Phase = corev1.PodFailed
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	podAfter(t, ns, "web", pod.UID)
	testenv.Eventually(t, wait, "two restarts to be counted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, ic)
		return ic.Status.AtProvider.Restarts == 2 && len(ic.Status.AtProvider.StartTimes) == 3, err
	})

	// A new image replaces the pod.
	ic.Spec.ForProvider.Image = "nginx:1.28"
	if err := env.Client.Update(ctx, ic); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the pod to run the new image", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-immortalpod"}, pod)
		return pod.Spec.Containers[0].Image == "nginx:1.28" && pod.DeletionTimestamp == nil, err
	})

	// Deleting the ImmortalContainer deletes its pod.
	if err := env.Client.Delete(ctx, ic); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the pod to be deleted with its ImmortalContainer", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-immortalpod"}, pod)
		return kerrors.IsNotFound(err), nil
	})
}

// TestImmortalContainerLeavesForeignPodAlone makes a pod of the same name that
// the provider did not create: it is neither deleted nor changed, and the
// ImmortalContainer says why it cannot proceed.
func TestImmortalContainerLeavesForeignPodAlone(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "foreign", nil)
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-immortalpod", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "postgres"}}},
	}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	ic := immortal(ns, "db")
	if err := env.Client.Create(ctx, ic); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "a Synced=False condition about the foreign pod", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db"}, ic)
		c := ic.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, `pod "db-immortalpod" exists but was not created by this ImmortalContainer`), err
	})
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db-immortalpod"}, got); err != nil {
		t.Fatal(err)
	}
	if got.UID != foreign.UID || got.Spec.Containers[0].Image != "postgres" {
		t.Errorf("the foreign pod was replaced or changed")
	}
}
