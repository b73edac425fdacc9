package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/drift"
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

// starts waits for the ImmortalContainer's status to count n starts, the
// newest of them pod, with one timestamp per start (n is below the bound of
// 10), newest last; it returns the ImmortalContainer as it then is.
func starts(t *testing.T, ns, name string, pod *corev1.Pod, n int64) *workloadv1alpha1.ImmortalContainer {
	t.Helper()
	ic := &workloadv1alpha1.ImmortalContainer{}
	testenv.Eventually(t, wait, fmt.Sprintf("status.atProvider to count %d starts, the last pod %s", n, pod.UID), func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ic)
		o := ic.Status.AtProvider
		return o.CurrentPod == name+"-immortalpod" && o.PodUID == string(pod.UID) && o.StartTimes == n, err
	})
	o := ic.Status.AtProvider
	if len(o.StartTimestamps) != int(n) || !o.StartTimestamps[n-1].Equal(&pod.CreationTimestamp) {
		t.Errorf("startTimestamps = %v, want %d of them, the last %s", o.StartTimestamps, n, pod.CreationTimestamp)
	}
	return ic
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
	starts(t, ns, "web", pod, 1)

	// Deleted: recreated on the watch event (the poll interval is an hour).
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod = podAfter(t, ns, "web", pod.UID)
	ic = starts(t, ns, "web", pod, 2)
	recent := func() []apisv1alpha1.Drift { return ic.Status.AtProvider.RecentDrift }
	driftReported(t, ic, recent, drift.Deleted("Pod", ns, "web-immortalpod"))

	// Ended: replaced.
	pod.Status.Phase = corev1.PodFailed
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod = podAfter(t, ns, "web", pod.UID)
	ic = starts(t, ns, "web", pod, 3)
	if ic.Status.AtProvider.Restarts != 2 {
		t.Errorf("restarts = %d, want 2", ic.Status.AtProvider.Restarts)
	}
	if n := len(ic.Status.AtProvider.RecentDrift); n != 1 {
		t.Errorf("recent drift after the pod ended: %+v, want the deletion's alone", ic.Status.AtProvider.RecentDrift)
	}

	// A new image replaces the pod.
	env.Update(t, ic, func() { ic.Spec.ForProvider.Image = "nginx:1.28" })
	testenv.Eventually(t, wait, "the pod to run the new image", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-immortalpod"}, pod)
		return pod.Spec.Containers[0].Image == "nginx:1.28" && pod.DeletionTimestamp == nil, err
	})
	ic = starts(t, ns, "web", pod, 4)
	if n := len(ic.Status.AtProvider.RecentDrift); n != 1 {
		t.Errorf("recent drift after the pod was replaced for a new image: %+v, want the deletion's alone", ic.Status.AtProvider.RecentDrift)
	}

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

// TestImmortalContainerReadsLegacyStatus hands the provider an
// ImmortalContainer as earlier releases left it, with the list of start times
// in status.atProvider.startTimes, where startTimes is now a count: the
// provider reads it, counts restarts + 1 starts, keeps the list as
// startTimestamps, writes the new shape and goes on counting. To store the old
// shape, the test serves the CRD with the earlier schema for a moment.
func TestImmortalContainerReadsLegacyStatus(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "legacy", nil)
	ic := immortal(ns, "old")
	if err := env.Client.Create(ctx, ic); err != nil {
		t.Fatal(err)
	}
	pod := podAfter(t, ns, "old", "")
	starts(t, ns, "old", pod, 1)
	// Paused, the provider leaves the status as the test writes it.
	env.Update(t, ic, func() { meta.AddAnnotations(ic, map[string]string{meta.AnnotationKeyReconciliationPaused: "true"}) })
	testenv.Eventually(t, wait, "the ImmortalContainer to be paused", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "old"}, ic)
		return ic.GetCondition(xpv2.TypeSynced).Reason == xpv2.ReasonReconcilePaused, err
	})

	// An earlier release's status: two restarts, the pod the third start.
	legacy := []any{
		pod.CreationTimestamp.Add(-2 * time.Hour).UTC().Format(time.RFC3339),
		pod.CreationTimestamp.Add(-time.Hour).UTC().Format(time.RFC3339),
		pod.CreationTimestamp.UTC().Format(time.RFC3339),
	}
	old := map[string]any{"currentPod": "old-immortalpod", "podUID": string(pod.UID), "startTimes": legacy, "restarts": int64(2)}
	restore := startTimesSchema(t, apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{
		Schema: &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"},
	}}, types.NamespacedName{Namespace: ns, Name: "old"})
	testenv.Eventually(t, wait, "the earlier status to be stored", func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(workloadv1alpha1.ImmortalContainerGroupVersionKind)
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "old"}, u); err != nil {
			return false, err
		}
		if err := unstructured.SetNestedField(u.Object, old, "status", "atProvider"); err != nil {
			return false, err
		}
		// Until the earlier schema is served, the list is refused.
		return true, env.Client.Status().Update(ctx, u)
	})
	restore()

	// The stored status is still the list, which the typed client reads.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workloadv1alpha1.ImmortalContainerGroupVersionKind)
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "old"}, u); err != nil {
		t.Fatal(err)
	}
	if l, ok, _ := unstructured.NestedSlice(u.Object, "status", "atProvider", "startTimes"); !ok || len(l) != 3 {
		t.Fatalf("stored status.atProvider = %v, want the earlier list of start times", u.Object["status"])
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "old"}, ic); err != nil {
		t.Fatalf("cannot read the earlier status: %v", err)
	}
	if o := ic.Status.AtProvider; o.StartTimes != 3 || len(o.StartTimestamps) != 3 {
		t.Errorf("read status.atProvider = %+v, want 3 starts and their 3 timestamps", o)
	}

	// Resumed (an update of the object whose stored status has the earlier
	// shape), the provider writes the new shape: the same pod, 3 starts.
	env.Update(t, ic, func() { meta.RemoveAnnotations(ic, meta.AnnotationKeyReconciliationPaused) })
	testenv.Eventually(t, wait, "the new shape to be written", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "old"}, u)
		n, ok, _ := unstructured.NestedInt64(u.Object, "status", "atProvider", "startTimes")
		ts, _, _ := unstructured.NestedSlice(u.Object, "status", "atProvider", "startTimestamps")
		return ok && n == 3 && len(ts) == 3, err
	})
	// And goes on counting.
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	next := podAfter(t, ns, "old", pod.UID)
	testenv.Eventually(t, wait, "the recreation to be counted from the earlier history", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "old"}, ic)
		o := ic.Status.AtProvider
		return o.PodUID == string(next.UID) && o.StartTimes == 4 && o.Restarts == 3 && len(o.StartTimestamps) == 4, err
	})
	if got, want := ic.Status.AtProvider.StartTimestamps[0].UTC().Format(time.RFC3339), legacy[0]; got != want {
		t.Errorf("oldest start timestamp = %s, want the earliest of the earlier list, %s", got, want)
	}
}

// startTimesSchema serves the ImmortalContainer CRD with schema for
// status.atProvider.startTimes, and returns a function that serves the CRD of
// package/crds again and waits until it is served, probing with the
// ImmortalContainer probe; a cleanup calls it too.
func startTimesSchema(t *testing.T, schema apiextensionsv1.JSONSchemaProps, probe types.NamespacedName) func() {
	t.Helper()
	ctx := context.Background()
	name := types.NamespacedName{Name: "immortalcontainers." + workloadv1alpha1.Group}
	set := func(s *apiextensionsv1.JSONSchemaProps) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Client.Get(ctx, name, crd); err != nil {
				return err
			}
			root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
			status := root.Properties["status"]
			atProvider := status.Properties["atProvider"]
			old := atProvider.Properties["startTimes"]
			atProvider.Properties["startTimes"] = *s
			status.Properties["atProvider"] = atProvider
			root.Properties["status"] = status
			if err := env.Client.Update(ctx, crd); err != nil {
				return err
			}
			*s = old
			return nil
		})
	}
	if err := set(&schema); err != nil {
		t.Fatal(err)
	}
	// schema now holds what package/crds has.
	done := false
	restore := func() {
		if done {
			return
		}
		done = true
		if err := set(&schema); err != nil {
			t.Fatal(err)
		}
		// Served again once a count in startTimes passes validation; the dry
		// run changes nothing.
		testenv.Eventually(t, wait, "the CRD of package/crds to be served again", func(ctx context.Context) (bool, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(workloadv1alpha1.ImmortalContainerGroupVersionKind)
			if err := env.Client.Get(ctx, probe, u); err != nil {
				return false, err
			}
			_ = unstructured.SetNestedField(u.Object, int64(1), "status", "atProvider", "startTimes")
			return true, env.Client.Status().Update(ctx, u, client.DryRunAll)
		})
	}
	t.Cleanup(restore)
	return restore
}
