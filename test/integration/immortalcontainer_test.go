package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	env.Update(t, ic, func() { ic.Spec.ForProvider.Image = "nginx:1.28" })
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

// fail marks a pod as ended by a crash, as the kubelet would.
func fail(t *testing.T, pod *corev1.Pod, code int32) {
	t.Helper()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodFailed
	pod.Status.StartTime = &now
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: "x", ImageID: "x", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: code, StartedAt: now, FinishedAt: now},
	}}}
	if err := env.Client.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

// TestImmortalContainerBacksOffCrashLoops crashes the pod twice in a row: the
// first crash is replaced at once, the second only after the initial backoff,
// with the reason and the time of the next restart in status.
func TestImmortalContainerBacksOffCrashLoops(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "crashloop", nil)
	ic := immortal(ns, "crashy")
	ic.Spec.ForProvider.RestartBackoff = &workloadv1alpha1.RestartBackoff{Initial: metav1.Duration{Duration: 2 * time.Second}, Max: metav1.Duration{Duration: time.Minute}}
	if err := env.Client.Create(ctx, ic); err != nil {
		t.Fatal(err)
	}
	first := podAfter(t, ns, "crashy", "")
	fail(t, first, 1)
	second := podAfter(t, ns, "crashy", first.UID)

	fail(t, second, 2)
	testenv.Eventually(t, wait, "the next restart to be scheduled", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "crashy"}, ic)
		o := ic.Status.AtProvider
		return o.NextRestartTime != nil && o.QuickEnds == 2 && o.LastExitReason == "Error (exit code 2)", err
	})
	next := ic.Status.AtProvider.NextRestartTime.Time
	if c := ic.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "2 quick ends in a row, restarting at") {
		t.Errorf("Ready condition = %+v, want False with the backoff explained", c)
	}
	third := podAfter(t, ns, "crashy", second.UID)
	// Creation timestamps have a resolution of one second.
	if third.CreationTimestamp.Add(time.Second).Before(next) {
		t.Errorf("the pod was replaced at %s, before the backoff ended at %s", third.CreationTimestamp, next)
	}

	events := &corev1.EventList{}
	testenv.Eventually(t, wait, "a StartedPod event for each start", func(ctx context.Context) (bool, error) {
		err := env.Client.List(ctx, events, client.InNamespace(ns))
		n := int32(0)
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "crashy" && e.Reason == "StartedPod" {
				n += e.Count
			}
		}
		return n >= 3, err
	})
}
