package immortalcontainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

const (
	// LabelOwner names the ImmortalContainer that owns a pod. The provider only
	// caches and watches pods that carry it.
	LabelOwner = "workload.clusterops.io/immortalcontainer"
	// annotationSpecHash records the parameters a pod was made from, so a
	// change that a running pod cannot take in place is seen.
	annotationSpecHash = "workload.clusterops.io/spec-hash"

	maxStartTimes = 10
)

// PodName is the name of the pod an ImmortalContainer keeps alive.
func PodName(ic *v1alpha1.ImmortalContainer) string {
	return ic.GetName() + "-immortalpod"
}

// specHash is a stable digest of the parameters that shape the pod.
func specHash(p v1alpha1.ImmortalContainerParameters) string {
	b, _ := json.Marshal(p) //nolint:errchkjson // Marshalling these plain types cannot fail.
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// desiredPod is the pod an ImmortalContainer wants. ownerRef is set when the
// pod lives in the same cluster as the ImmortalContainer.
func desiredPod(ic *v1alpha1.ImmortalContainer, ownerRef bool) *corev1.Pod {
	p := ic.Spec.ForProvider
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        PodName(ic),
			Namespace:   ic.GetNamespace(),
			Labels:      map[string]string{LabelOwner: ic.GetName(), "app.kubernetes.io/managed-by": "provider-clusterops"},
			Annotations: map[string]string{annotationSpecHash: specHash(p)},
		},
		Spec: corev1.PodSpec{
			// The provider, not the kubelet, restarts the pod when it ends.
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:    "main",
				Image:   p.Image,
				Command: p.Command,
				Args:    p.Args,
				Env:     p.Env,
			}},
		},
	}
	if ownerRef {
		meta.AddOwnerReference(pod, meta.AsController(meta.TypedReferenceTo(ic, v1alpha1.ImmortalContainerGroupVersionKind)))
	}
	return pod
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

// ownedBy reports whether the pod was made for this ImmortalContainer.
func ownedBy(pod *corev1.Pod, ic *v1alpha1.ImmortalContainer) bool {
	return pod.GetLabels()[LabelOwner] == ic.GetName()
}

// recordStart appends a start time, keeping the newest maxStartTimes.
func recordStart(o *v1alpha1.ImmortalContainerObservation, t metav1.Time) {
	if len(o.StartTimes) > 0 {
		o.Restarts++
	}
	o.StartTimes = append(o.StartTimes, t)
	if n := len(o.StartTimes); n > maxStartTimes {
		o.StartTimes = o.StartTimes[n-maxStartTimes:]
	}
}
