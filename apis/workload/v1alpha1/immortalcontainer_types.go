package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
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
}

// ImmortalContainerObservation is the observed state of an ImmortalContainer.
type ImmortalContainerObservation struct {
	// CurrentPod is the name of the pod that is running the image now.
	// +optional
	CurrentPod string `json:"currentPod,omitempty"`

	// PodUID is the UID of the current pod; a new UID means a new start.
	// +optional
	PodUID string `json:"podUID,omitempty"`

	// StartTimes are the times the pod was (re)created, newest last. Only the
	// most recent 10 are kept.
	// +optional
	StartTimes []metav1.Time `json:"startTimes,omitempty"`

	// Restarts counts how often the pod was recreated after it ended or was
	// deleted.
	// +optional
	Restarts int64 `json:"restarts,omitempty"`
}

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
// ends or is deleted.
// +kubebuilder:printcolumn:name="IMAGE",type="string",JSONPath=".spec.forProvider.image"
// +kubebuilder:printcolumn:name="POD",type="string",JSONPath=".status.atProvider.currentPod"
// +kubebuilder:printcolumn:name="RESTARTS",type="integer",JSONPath=".status.atProvider.restarts"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
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
