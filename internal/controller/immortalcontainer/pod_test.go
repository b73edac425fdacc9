package immortalcontainer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

func backoff(initial, maxDelay time.Duration) v1alpha1.RestartBackoff {
	return v1alpha1.RestartBackoff{Initial: metav1.Duration{Duration: initial}, Max: metav1.Duration{Duration: maxDelay}}
}

func TestRestartDelay(t *testing.T) {
	b := backoff(time.Second, 5*time.Second)
	cases := map[string]struct {
		reason    string
		quickEnds int32
		want      time.Duration
	}{
		"FirstEnd":       {reason: "A pod that ends once is replaced at once.", quickEnds: 1, want: 0},
		"SecondQuickEnd": {reason: "The second quick end in a row waits initial.", quickEnds: 2, want: time.Second},
		"ThirdQuickEnd":  {reason: "Each further quick end doubles the delay.", quickEnds: 3, want: 2 * time.Second},
		"FourthQuickEnd": {reason: "Each further quick end doubles the delay.", quickEnds: 4, want: 4 * time.Second},
		"Capped":         {reason: "The delay never exceeds max.", quickEnds: 5, want: 5 * time.Second},
		"NoOverflow":     {reason: "Many quick ends do not overflow the delay.", quickEnds: 1 << 20, want: 5 * time.Second},
		"NoEndsRecorded": {reason: "Zero quick ends needs no delay.", quickEnds: 0, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, restartDelay(tc.quickEnds, b)); diff != "" {
				t.Errorf("\n%s\nrestartDelay(%d): -want, +got:\n%s", tc.reason, tc.quickEnds, diff)
			}
		})
	}
}

func endedPod(uid string, started, finished time.Time, reason string, code int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), CreationTimestamp: metav1.NewTime(started)},
		Status: corev1.PodStatus{
			Phase:     corev1.PodFailed,
			StartTime: &metav1.Time{Time: started},
			ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: reason, ExitCode: code, FinishedAt: metav1.NewTime(finished),
			}}}},
		},
	}
}

func TestRecordEnd(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b := backoff(time.Second, time.Minute)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	cases := map[string]struct {
		reason string
		before v1alpha1.ImmortalContainerObservation
		pod    *corev1.Pod
		want   v1alpha1.ImmortalContainerObservation
	}{
		"FirstQuickEnd": {
			reason: "A first crash is recorded and replaced at once.",
			pod:    endedPod("a", now.Add(-time.Second), now, "Error", 1),
			want:   v1alpha1.ImmortalContainerObservation{EndedPodUID: "a", LastExitReason: "Error (exit code 1)", QuickEnds: 1, NextRestartTime: at(0)},
		},
		"SecondQuickEnd": {
			reason: "A second crash in a row waits initial from when it ended.",
			before: v1alpha1.ImmortalContainerObservation{EndedPodUID: "a", QuickEnds: 1},
			pod:    endedPod("b", now.Add(-time.Second), now, "Error", 2),
			want:   v1alpha1.ImmortalContainerObservation{EndedPodUID: "b", LastExitReason: "Error (exit code 2)", QuickEnds: 2, NextRestartTime: at(time.Second)},
		},
		"LongRunResets": {
			reason: "A pod that ran for more than ten minutes starts the count afresh.",
			before: v1alpha1.ImmortalContainerObservation{EndedPodUID: "a", QuickEnds: 7},
			pod:    endedPod("b", now.Add(-time.Hour), now, "Completed", 0),
			want:   v1alpha1.ImmortalContainerObservation{EndedPodUID: "b", LastExitReason: "Completed (exit code 0)", QuickEnds: 1, NextRestartTime: at(0)},
		},
		"SamePodOnce": {
			reason: "An ended pod already accounted for changes nothing.",
			before: v1alpha1.ImmortalContainerObservation{EndedPodUID: "b", QuickEnds: 2, LastExitReason: "x", NextRestartTime: at(time.Second)},
			pod:    endedPod("b", now.Add(-time.Second), now, "Error", 1),
			want:   v1alpha1.ImmortalContainerObservation{EndedPodUID: "b", QuickEnds: 2, LastExitReason: "x", NextRestartTime: at(time.Second)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.before
			changed := recordEnd(&got, tc.pod, b, now)
			if diff := cmp.Diff(!cmp.Equal(tc.want, tc.before), changed); diff != "" {
				t.Errorf("\n%s\nrecordEnd(...) changed: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nrecordEnd(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestExitReason(t *testing.T) {
	cases := map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"Terminated": {pod: endedPod("a", time.Time{}, time.Time{}, "OOMKilled", 137), want: "OOMKilled (exit code 137)"},
		"PodReason":  {pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, want: "Evicted"},
		"PhaseOnly":  {pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, want: "Succeeded"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, exitReason(tc.pod)); diff != "" {
				t.Errorf("exitReason: -want, +got:\n%s", diff)
			}
		})
	}
}

func TestDesiredPod(t *testing.T) {
	ic := &v1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", UID: "u"},
		Spec: v1alpha1.ImmortalContainerSpec{ForProvider: v1alpha1.ImmortalContainerParameters{
			Image: "nginx", Args: []string{"-g", "daemon off;"},
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		}},
	}
	pod := desiredPod(ic, true)
	want := corev1.Container{Name: "main", Image: "nginx", Args: []string{"-g", "daemon off;"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}
	if diff := cmp.Diff(want, pod.Spec.Containers[0]); diff != "" {
		t.Errorf("container: -want, +got:\n%s", diff)
	}
	if pod.Name != "web-immortalpod" || pod.Namespace != "apps" || pod.Labels[LabelOwner] != "web" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod metadata or restart policy wrong: %+v", pod.ObjectMeta)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != "u" {
		t.Errorf("owner references = %v, want the ImmortalContainer", pod.OwnerReferences)
	}
	if got := desiredPod(ic, false).OwnerReferences; len(got) != 0 {
		t.Errorf("a pod in a remote cluster got owner references %v", got)
	}

	// The backoff does not shape the pod: changing it must not replace the pod.
	changed := ic.DeepCopy()
	changed.Spec.ForProvider.RestartBackoff = &v1alpha1.RestartBackoff{}
	if specHash(changed.Spec.ForProvider) != specHash(ic.Spec.ForProvider) {
		t.Errorf("changing restartBackoff changes the pod's spec hash")
	}
	changed.Spec.ForProvider.Image = "nginx:2"
	if specHash(changed.Spec.ForProvider) == specHash(ic.Spec.ForProvider) {
		t.Errorf("changing the image does not change the pod's spec hash")
	}
}

func TestUntilRestart(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	hook := untilRestart(func() time.Time { return now })
	at := metav1.NewTime(now.Add(3 * time.Second))
	past := metav1.NewTime(now.Add(-time.Second))
	cases := map[string]struct {
		next *metav1.Time
		want time.Duration
	}{
		"NoRestartPending": {want: time.Hour},
		"RestartDue":       {next: &at, want: 3 * time.Second},
		"RestartOverdue":   {next: &past, want: 10 * time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ic := &v1alpha1.ImmortalContainer{Status: v1alpha1.ImmortalContainerStatus{AtProvider: v1alpha1.ImmortalContainerObservation{NextRestartTime: tc.next}}}
			if diff := cmp.Diff(tc.want, hook(ic, time.Hour)); diff != "" {
				t.Errorf("poll interval: -want, +got:\n%s", diff)
			}
		})
	}
}

// FuzzRestartDelay feeds backoffs users write: the delay is never negative,
// never longer than max, and never shrinks as quick ends go on, even for
// durations near the largest a Duration holds.
func FuzzRestartDelay(f *testing.F) {
	f.Add(int64(time.Second), int64(5*time.Minute), int32(3))
	f.Add(int64(0), int64(time.Hour), int32(1000))
	f.Add(int64(2000000*time.Hour), int64(2500000*time.Hour), int32(3))
	f.Fuzz(func(t *testing.T, initial, maxDelay int64, quickEnds int32) {
		// The CRD admits only positive durations with max >= initial.
		if initial < 0 || maxDelay < initial {
			return
		}
		b := backoff(time.Duration(initial), time.Duration(maxDelay))
		quickEnds %= 100 // Bound the loop; doubling reaches max well within.
		prev := time.Duration(0)
		for n := int32(0); n <= quickEnds; n++ {
			d := restartDelay(n, b)
			if d < 0 || d > b.Max.Duration {
				t.Fatalf("restartDelay(%d, %+v) = %s, want within [0, max]", n, b, d)
			}
			if d < prev {
				t.Fatalf("restartDelay(%d, %+v) = %s, shorter than %s before it", n, b, d, prev)
			}
			prev = d
		}
	})
}
