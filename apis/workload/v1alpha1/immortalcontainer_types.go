package v1alpha1

import (
	"bytes"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "k8s.io/apimachinery/pkg/util/json"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

// ImmortalContainerParameters are the configurable fields of an
// ImmortalContainer.
type ImmortalContainerParameters struct {
	// Image the pod runs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.trim() == self && !self.contains(' ')",message="image must not contain spaces"
	Image string `json:"image"`

	// Command overrides the image's entrypoint.
	// +optional
	Command []string `json:"command,omitempty"`

	// Args are passed to the command.
	// +optional
	Args []string `json:"args,omitempty"`

	// Env sets environment variables in the container.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Resources the container requests and is limited to.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// RestartBackoff slows down the restarts of an image that keeps crashing.
	// A pod that ends is replaced at once; when its successor also ends within
	// ten minutes, the next one waits initial, then twice as long each time, up
	// to max. A deleted pod is always replaced at once.
	// +optional
	// +kubebuilder:default={initial: "1s", max: "5m"}
	RestartBackoff *RestartBackoff `json:"restartBackoff,omitempty"`
}

// RestartBackoff is the growing delay between restarts of a crashing image.
// +kubebuilder:validation:XValidation:rule="self.initial.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') && self.max.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="restartBackoff.initial and max are durations such as 500ms, 10s, 5m or 1h30m"
// +kubebuilder:validation:XValidation:rule="!self.initial.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') || !self.max.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') || duration(self.max) >= duration(self.initial)",message="restartBackoff.max must not be shorter than restartBackoff.initial"
type RestartBackoff struct {
	// Initial delay, before the second restart in a row.
	// +kubebuilder:default="1s"
	Initial metav1.Duration `json:"initial"`

	// Max delay between restarts.
	// +kubebuilder:default="5m"
	Max metav1.Duration `json:"max"`
}

// ImmortalContainerObservation is the observed state of an ImmortalContainer.
type ImmortalContainerObservation struct {
	// CurrentPod is the name of the pod that is running the image now.
	// +optional
	CurrentPod string `json:"currentPod,omitempty"`

	// PodUID is the UID of the current pod; a new UID means a new start.
	// +optional
	PodUID string `json:"podUID,omitempty"`

	// StartTimes is how many times the pod has been created: 1 once it first
	// starts, 2 after it was recreated once, and so on. It is not capped.
	// +optional
	StartTimes int64 `json:"startTimes,omitempty"`

	// StartTimestamps are the times the most recent pods were created, newest
	// last. Only the most recent 10 are kept; startTimes counts them all.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	StartTimestamps []metav1.Time `json:"startTimestamps,omitempty"`

	// Restarts counts how often the pod was recreated after it ended or was
	// deleted: startTimes less the first start.
	// +optional
	Restarts int64 `json:"restarts,omitempty"`

	// LastExitReason says why the last pod that ended ended, such as
	// "Error (exit code 1)" or "Completed (exit code 0)".
	// +optional
	LastExitReason string `json:"lastExitReason,omitempty"`

	// QuickEnds counts the pods in a row that ended within ten minutes of
	// starting; it drives the restart backoff.
	// +optional
	QuickEnds int32 `json:"quickEnds,omitempty"`

	// NextRestartTime is when an ended pod will be replaced, while a crash
	// loop is being backed off.
	// +optional
	NextRestartTime *metav1.Time `json:"nextRestartTime,omitempty"`

	// EndedPodUID is the UID of the last pod that ended, or that the
	// provider replaced after a change of parameters, already accounted for.
	// +optional
	EndedPodUID string `json:"endedPodUID,omitempty"`

	// RecentDrift lists, newest first, the last five times another writer
	// deleted the running pod and the provider made it again.
	// +optional
	// +kubebuilder:validation:MaxItems=5
	RecentDrift []apisv1alpha1.Drift `json:"recentDrift,omitempty"`

	// Plan lists the pod it would create or replace, while spec.managementPolicies
	// is only Observe; empty otherwise.
	// +optional
	Plan *apisv1alpha1.Plan `json:"plan,omitempty"`
}

// UnmarshalJSON reads an observation, including one written before startTimes
// became a count, when it was the list of start times that startTimestamps now
// holds: the list moves to startTimestamps, and the count is restarts + 1,
// since restarts counted every start after the first and was never capped.
// The controller's next status write stores the new shape.
func (o *ImmortalContainerObservation) UnmarshalJSON(b []byte) error {
	// observation has the fields but not this method. The outer fields shadow
	// its startTimes and startTimestamps, which are read below.
	type observation ImmortalContainerObservation
	v := struct {
		*observation
		StartTimes      json.RawMessage `json:"startTimes,omitempty"`
		StartTimestamps json.RawMessage `json:"startTimestamps,omitempty"`
	}{observation: (*observation)(o)}
	if err := kjson.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.StartTimestamps != nil {
		if err := kjson.Unmarshal(v.StartTimestamps, &o.StartTimestamps); err != nil {
			return err
		}
	}
	if raw := bytes.TrimSpace(v.StartTimes); len(raw) == 0 || raw[0] != '[' {
		if raw == nil {
			return nil
		}
		return kjson.Unmarshal(raw, &o.StartTimes)
	}
	var legacy []metav1.Time
	if err := kjson.Unmarshal(v.StartTimes, &legacy); err != nil {
		return err
	}
	o.StartTimes = 0
	if len(legacy) > 0 {
		o.StartTimes = o.Restarts + 1
	}
	if v.StartTimestamps == nil {
		o.StartTimestamps = legacy
	}
	return nil
}

// Keys of an ImmortalContainer's connection details, which it writes to the
// Secret that spec.writeConnectionSecretToRef names.
const (
	// ImmortalContainerPodNameKey is the name of its pod, always
	// <name>-immortalpod.
	ImmortalContainerPodNameKey = "podName"
	// ImmortalContainerPodIPKey is the IP of its current pod from when the pod
	// has one until it ends or is being deleted, and empty otherwise: its
	// replacement gets a new IP.
	ImmortalContainerPodIPKey = "podIP"
)

// An ImmortalContainerSpec defines the desired state of an ImmortalContainer.
type ImmortalContainerSpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`
	ForProvider              ImmortalContainerParameters `json:"forProvider"`
}

// An ImmortalContainerStatus represents the observed state of an
// ImmortalContainer.
type ImmortalContainerStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 ImmortalContainerObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// An ImmortalContainer keeps exactly one pod named <name>-immortalpod running
// spec.forProvider.image in its own namespace, and creates it again whenever it
// ends or is deleted. Its connection details (spec.writeConnectionSecretToRef)
// are podName, the pod's name, and podIP, the current pod's IP from when it
// has one until it ends or is being deleted (empty otherwise).
// +kubebuilder:printcolumn:name="IMAGE",type="string",JSONPath=".spec.forProvider.image"
// +kubebuilder:printcolumn:name="POD",type="string",JSONPath=".status.atProvider.currentPod"
// +kubebuilder:printcolumn:name="STARTS",type="integer",JSONPath=".status.atProvider.startTimes"
// +kubebuilder:printcolumn:name="RESTARTS",type="integer",JSONPath=".status.atProvider.restarts"
// +kubebuilder:printcolumn:name="LAST-EXIT",type="string",JSONPath=".status.atProvider.lastExitReason",priority=1
// +kubebuilder:printcolumn:name="NEXT-RESTART",type="date",JSONPath=".status.atProvider.nextRestartTime",priority=1
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="PLAN",type="string",JSONPath=".status.atProvider.plan.summary"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,clusterops}
type ImmortalContainer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ImmortalContainerSpec   `json:"spec"`
	Status ImmortalContainerStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ImmortalContainerList contains a list of ImmortalContainer.
type ImmortalContainerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImmortalContainer `json:"items"`
}
