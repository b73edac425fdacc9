package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// A SourceRef names a ConfigMap or Secret in the ConfigRollout's namespace.
type SourceRef struct {
	// Name of the ConfigMap or Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Keys limits what counts as a change to these keys; empty means any key.
	// +optional
	// +listType=set
	Keys []string `json:"keys,omitempty"`
}

// A WorkloadRef names a workload in the ConfigRollout's namespace.
type WorkloadRef struct {
	// Kind of the workload.
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet
	Kind string `json:"kind"`

	// Name of the workload.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ConfigRolloutParameters are the configurable fields of a ConfigRollout.
// +kubebuilder:validation:XValidation:rule="(has(self.configMaps) ? size(self.configMaps) : 0) + (has(self.secrets) ? size(self.secrets) : 0) > 0",message="name at least one source in configMaps or secrets"
// +kubebuilder:validation:XValidation:rule="[has(self.workloads) && size(self.workloads) > 0, has(self.selector), has(self.auto) && self.auto].filter(x, x).size() == 1",message="choose the workloads with exactly one of workloads, selector or auto: true"
// +kubebuilder:validation:XValidation:rule="!has(self.debounce) || self.debounce.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="debounce is a duration such as 500ms, 10s or 1m"
type ConfigRolloutParameters struct {
	// ConfigMaps whose changes roll the workloads.
	// +optional
	// +listType=map
	// +listMapKey=name
	ConfigMaps []SourceRef `json:"configMaps,omitempty"`

	// Secrets whose changes roll the workloads. Their content appears nowhere
	// but in the hash.
	// +optional
	// +listType=map
	// +listMapKey=name
	Secrets []SourceRef `json:"secrets,omitempty"`

	// Workloads to roll, by kind and name.
	// +optional
	Workloads []WorkloadRef `json:"workloads,omitempty"`

	// Selector picks the Deployments, StatefulSets and DaemonSets to roll by
	// their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Auto rolls every Deployment, StatefulSet and DaemonSet in the namespace
	// whose pod template uses one of the sources, through volumes, envFrom or
	// env valueFrom.
	// +optional
	Auto bool `json:"auto,omitempty"`

	// Debounce gathers the changes within this window into one rollout.
	// +optional
	Debounce *metav1.Duration `json:"debounce,omitempty"`
}

// SourceHash is the hash of one source's content.
type SourceHash struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Hash string `json:"hash"`
	// Missing is true when the source does not exist.
	// +optional
	Missing bool `json:"missing,omitempty"`
}

// RolledWorkload is a workload a ConfigRollout selects.
type RolledWorkload struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Hash the workload's pod template carries.
	// +optional
	Hash string `json:"hash,omitempty"`
	// LastRollout is when this ConfigRollout last rolled it.
	// +optional
	LastRollout *metav1.Time `json:"lastRollout,omitempty"`
}

// ConfigRolloutObservation is the observed state of a ConfigRollout.
type ConfigRolloutObservation struct {
	// Hash of all sources together: what the pod templates carry.
	// +optional
	Hash string `json:"hash,omitempty"`

	// ChangedAt is when Hash last changed; a rollout waits for the debounce
	// window from here.
	// +optional
	ChangedAt *metav1.Time `json:"changedAt,omitempty"`

	// Sources and their current hashes.
	// +optional
	Sources []SourceHash `json:"sources,omitempty"`

	// Workloads selected, with the hash each carries.
	// +optional
	Workloads []RolledWorkload `json:"workloads,omitempty"`

	// Rollouts counts the workload rollouts this ConfigRollout triggered.
	// +optional
	Rollouts int64 `json:"rollouts,omitempty"`
}

// A ConfigRolloutSpec defines the desired state of a ConfigRollout. A
// ConfigRollout has no connection details: spec.writeConnectionSecretToRef is
// refused.
// +kubebuilder:validation:XValidation:rule="!has(self.writeConnectionSecretToRef)",message="a ConfigRollout has no connection details: remove spec.writeConnectionSecretToRef"
type ConfigRolloutSpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`
	ForProvider              ConfigRolloutParameters `json:"forProvider"`
}

// A ConfigRolloutStatus represents the observed state of a ConfigRollout.
type ConfigRolloutStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 ConfigRolloutObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// A ConfigRollout rolls Deployments, StatefulSets and DaemonSets when the
// ConfigMaps or Secrets they use change: it writes a hash of the content into
// their pod templates (annotation workload.clusterops.io/config-hash), and the
// workloads' own controllers roll the pods. The hash is deterministic, so a
// provider restart rolls nothing that did not change. It is Ready when every
// selected workload carries the current hash. It has no connection details,
// so spec.writeConnectionSecretToRef is refused.
// +kubebuilder:printcolumn:name="HASH",type="string",JSONPath=".status.atProvider.hash"
// +kubebuilder:printcolumn:name="ROLLOUTS",type="integer",JSONPath=".status.atProvider.rollouts"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,clusterops}
type ConfigRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigRolloutSpec   `json:"spec"`
	Status ConfigRolloutStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ConfigRolloutList contains a list of ConfigRollout.
type ConfigRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigRollout `json:"items"`
}
