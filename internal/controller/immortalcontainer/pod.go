package immortalcontainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/ownership"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

const (
	// LabelOwner names the ImmortalContainer that owns a pod. The provider only
	// caches and watches pods that carry it.
	LabelOwner = "workload.clusterops.io/immortalcontainer"
	// annotationSpecHash records the parameters a pod was made from, so a
	// change that a running pod cannot take in place is seen.
	annotationSpecHash = "workload.clusterops.io/spec-hash"

	// maxStartTimestamps bounds status.atProvider.startTimestamps; the CRD
	// admits no more.
	maxStartTimestamps = 10

	// quickEnd is how long a pod must run for its end not to count as a crash
	// (as the kubelet resets its own crash-loop backoff after ten minutes).
	quickEnd = 10 * time.Minute
)

// Defaults of spec.forProvider.restartBackoff; the CRD defaults them too.
var defaultBackoff = v1alpha1.RestartBackoff{Initial: metav1.Duration{Duration: time.Second}, Max: metav1.Duration{Duration: 5 * time.Minute}}

// PodName is the name of the pod an ImmortalContainer keeps alive.
func PodName(ic *v1alpha1.ImmortalContainer) string {
	return ic.GetName() + "-immortalpod"
}

// specHash is a stable digest of the parameters that shape the pod. The
// backoff does not shape the pod, so changing it does not replace the pod.
func specHash(p v1alpha1.ImmortalContainerParameters) string {
	p.RestartBackoff = nil
	b, _ := json.Marshal(p) //nolint:errchkjson // Marshalling these plain types cannot fail.
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// desiredPod is the pod an ImmortalContainer wants. ownerRef is set when the
// pod lives in the same cluster as the ImmortalContainer.
func desiredPod(ic *v1alpha1.ImmortalContainer, ownerRef bool) *corev1.Pod {
	p := ic.Spec.ForProvider
	c := corev1.Container{Name: "main", Image: p.Image, Command: p.Command, Args: p.Args, Env: p.Env}
	if p.Resources != nil {
		c.Resources = *p.Resources
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        PodName(ic),
			Namespace:   ic.GetNamespace(),
			Labels:      shard.Carry(map[string]string{podMark.Key: podMark.Value(ic), ownership.LabelManagedBy: ownership.ManagedBy}, ic.GetLabels()),
			Annotations: map[string]string{annotationSpecHash: specHash(p)},
		},
		Spec: corev1.PodSpec{
			// The provider, not the kubelet, restarts the pod when it ends.
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{c},
		},
	}
	if ownerRef {
		meta.AddOwnerReference(pod, meta.AsController(meta.TypedReferenceTo(ic, v1alpha1.ImmortalContainerGroupVersionKind)))
	}
	return pod
}

// sameSpec reports whether pod runs the ImmortalContainer's current
// parameters.
func sameSpec(ic *v1alpha1.ImmortalContainer, pod *corev1.Pod) bool {
	return pod.GetAnnotations()[annotationSpecHash] == specHash(ic.Spec.ForProvider)
}

// shardLabelled reports whether pod carries the shard label its
// ImmortalContainer carries, or neither carries one: the replica acting on
// the ImmortalContainer watches only the pods of its shards.
func shardLabelled(ic *v1alpha1.ImmortalContainer, pod *corev1.Pod) bool {
	want, wanted := ic.GetLabels()[shard.Label]
	got, has := pod.GetLabels()[shard.Label]
	return wanted == has && want == got
}

// ended reports whether a pod has stopped for good (it never restarts itself).
func ended(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// running reports whether a pod runs and is ready.
func running(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podMark marks a pod as made for the ImmortalContainer of its label's name.
var podMark = ownership.ByName(LabelOwner)

// recordStart counts a new pod, created at t, and appends t to the start
// timestamps, keeping the newest maxStartTimestamps. The count is not bounded
// by the list: it lives in status, so a restarted provider goes on from it.
func recordStart(o *v1alpha1.ImmortalContainerObservation, t metav1.Time) {
	if o.StartTimes > 0 {
		o.Restarts++
	}
	o.StartTimes++
	o.StartTimestamps = append(o.StartTimestamps, t)
	if n := len(o.StartTimestamps); n > maxStartTimestamps {
		o.StartTimestamps = o.StartTimestamps[n-maxStartTimestamps:]
	}
}

// restartDelay is how long to wait before replacing a pod that ended as the
// quickEnds-th quick end in a row: the first is replaced at once, then the
// delay starts at initial and doubles up to max.
func restartDelay(quickEnds int32, b v1alpha1.RestartBackoff) time.Duration {
	if quickEnds <= 1 {
		return 0
	}
	d := b.Initial.Duration
	for i := int32(2); i < quickEnds && d < b.Max.Duration; i++ {
		// Doubling a delay beyond half the largest Duration would overflow
		// into a negative one; max is where it stops anyway.
		if d > b.Max.Duration/2 {
			d = b.Max.Duration
			break
		}
		d *= 2
	}
	return max(min(d, b.Max.Duration), 0)
}

// exitReason says why a pod ended, from its container's last state.
func exitReason(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil {
			return fmt.Sprintf("%s (exit code %d)", t.Reason, t.ExitCode)
		}
	}
	if pod.Status.Reason != "" {
		return pod.Status.Reason
	}
	return string(pod.Status.Phase)
}

// times returns when a pod started and when it ended, falling back to its
// creation and to now where the kubelet did not say.
func times(pod *corev1.Pod, now time.Time) (start, end time.Time) {
	start, end = pod.GetCreationTimestamp().Time, now
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	for _, s := range pod.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
			end = t.FinishedAt.Time
		}
	}
	return start, end
}

// recordEnd accounts for an ended pod once: its exit reason, whether it was a
// quick end, and when it may be replaced. It reports whether it changed o.
func recordEnd(o *v1alpha1.ImmortalContainerObservation, pod *corev1.Pod, b v1alpha1.RestartBackoff, now time.Time) bool {
	if o.EndedPodUID == string(pod.GetUID()) {
		return false
	}
	o.EndedPodUID = string(pod.GetUID())
	o.LastExitReason = exitReason(pod)
	start, end := times(pod, now)
	if end.Sub(start) < quickEnd {
		o.QuickEnds++
	} else {
		o.QuickEnds = 1
	}
	t := metav1.NewTime(end.Add(restartDelay(o.QuickEnds, b)))
	o.NextRestartTime = &t
	return true
}
