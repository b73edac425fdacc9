package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// Kinds a CopyRule copies.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

// ConflictPolicy says what a CopyRule does with an object in a target
// namespace that has a source's name but that the rule did not create.
type ConflictPolicy string

// Conflict policies.
const (
	// ConflictSkip leaves the object alone and reports it.
	ConflictSkip ConflictPolicy = "Skip"
	// ConflictAdopt takes the object over when its content already equals the
	// source's, so nothing is lost; otherwise it is left alone and reported.
	ConflictAdopt ConflictPolicy = "Adopt"
	// ConflictOverwrite takes the object over and replaces its content.
	ConflictOverwrite ConflictPolicy = "Overwrite"
)

// CopyRuleParameters are the configurable fields of a CopyRule.
// +kubebuilder:validation:XValidation:rule="(has(self.selector) && ((has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0))) || (has(self.names) && size(self.names) > 0)",message="set a non-empty selector or names: a rule must not copy every object of its source namespace by accident"
// +kubebuilder:validation:XValidation:rule="[has(self.namespaces) && size(self.namespaces) > 0, has(self.namespacePattern), has(self.namespaceSelector), has(self.allNamespaces) && self.allNamespaces].filter(x, x).size() == 1",message="set exactly one of namespaces, namespacePattern, namespaceSelector or allNamespaces: true"
type CopyRuleParameters struct {
	// Kind of the objects copied. It cannot change: a rule's copies are all
	// of one kind.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="kind is immutable: create another rule"
	Kind string `json:"kind"`

	// SourceNamespace holds the objects to copy. It defaults to the rule's own
	// namespace; another namespace must be within the reach its config grants.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="sourceNamespace: a namespace name is lowercase letters, digits and '-', and starts and ends with a letter or digit"
	SourceNamespace string `json:"sourceNamespace,omitempty"`

	// Selector selects the objects to copy by label. An object is copied when
	// the selector or Names selects it.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Names of objects to copy.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="names: an object name is lowercase letters, digits, '-' and '.', and starts and ends with a letter or digit"
	Names []string `json:"names,omitempty"`

	// Namespaces to copy into, by name. A listed namespace that does not
	// exist yet gets its copies when it is created.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="namespaces: a namespace name is lowercase letters, digits and '-', and starts and ends with a letter or digit"
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespacePattern selects the namespaces to copy into by a regular
	// expression (RE2 syntax) that must match the whole name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="''.matches(self) || !''.matches(self)",message="namespacePattern must be a valid regular expression"
	NamespacePattern string `json:"namespacePattern,omitempty"`

	// NamespaceSelector selects the namespaces to copy into by label.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// AllNamespaces copies into every namespace within reach.
	// +optional
	AllNamespaces bool `json:"allNamespaces,omitempty"`

	// ConflictPolicy says what to do when a target namespace already holds an
	// object of a source's name that this rule did not create: Skip leaves it
	// and reports it; Adopt takes it over only when its content already equals
	// the source's (nothing is lost); Overwrite takes it over and replaces its
	// content. Objects taken over are released, never deleted, when they stop
	// being targets.
	// +optional
	// +kubebuilder:default=Skip
	// +kubebuilder:validation:Enum=Skip;Adopt;Overwrite
	ConflictPolicy ConflictPolicy `json:"conflictPolicy,omitempty"`

	// MaxParallelWrites bounds how many copies are written at once.
	// +optional
	// +kubebuilder:default=16
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	MaxParallelWrites int32 `json:"maxParallelWrites,omitempty"`
}

// Reasons a target is reported as a problem.
const (
	ProblemConflict         = "Conflict"
	ProblemOutOfReach       = "OutOfReach"
	ProblemWriteFailed      = "WriteFailed"
	ProblemRefused          = "Refused"
	ProblemPruneSkipped     = "PruneSkipped"
	ProblemNamespaceMissing = "NamespaceMissing"
)

// A CopyProblem is an object a CopyRule could not keep in sync, and why.
type CopyProblem struct {
	// Namespace and Name of the object (a target copy, or a refused source).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Reason is Conflict, OutOfReach, WriteFailed, Refused, PruneSkipped or
	// NamespaceMissing.
	Reason string `json:"reason"`
	// Message says what happened and what to do.
	Message string `json:"message"`
}

// An ObservedSource is a source object and the version of it last copied.
type ObservedSource struct {
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

// MaxProblems and MaxObservedSources bound the lists in status.
const (
	MaxProblems        = 20
	MaxObservedSources = 50
)

// CopyRuleObservation is the observed state of a CopyRule.
type CopyRuleObservation struct {
	// Sources counts the source objects selected.
	// +optional
	Sources int32 `json:"sources,omitempty"`
	// IntendedCopies counts the copies the rule should keep: sources times
	// target namespaces.
	// +optional
	IntendedCopies int32 `json:"intendedCopies,omitempty"`
	// CopiesInSync counts the intended copies that equal their source.
	// +optional
	CopiesInSync int32 `json:"copiesInSync,omitempty"`
	// Copies is CopiesInSync/IntendedCopies, for the printer column.
	// +optional
	Copies string `json:"copies,omitempty"`
	// Skipped counts intended copies left alone on purpose (conflicts under
	// Skip or Adopt, namespaces out of reach).
	// +optional
	Skipped int32 `json:"skipped,omitempty"`
	// Failed counts intended copies whose last write failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Problems lists up to 20 objects the rule could not keep in sync, and why.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Problems []CopyProblem `json:"problems,omitempty"`
	// MoreProblems counts the problems beyond those listed.
	// +optional
	MoreProblems int32 `json:"moreProblems,omitempty"`
	// ObservedSources are up to 50 of the sources, with the resourceVersion
	// the copies follow.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	ObservedSources []ObservedSource `json:"observedSources,omitempty"`
	// LastFullSync is when every intended copy was last brought in sync.
	// +optional
	LastFullSync *metav1.Time `json:"lastFullSync,omitempty"`
}

// A CopyRuleSpec defines the desired state of a CopyRule. A CopyRule has no
// connection details: spec.writeConnectionSecretToRef is refused.
// +kubebuilder:validation:XValidation:rule="!has(self.writeConnectionSecretToRef)",message="a CopyRule has no connection details: remove spec.writeConnectionSecretToRef"
type CopyRuleSpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`
	ForProvider              CopyRuleParameters `json:"forProvider"`
}

// A CopyRuleStatus represents the observed state of a CopyRule.
type CopyRuleStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 CopyRuleObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// A CopyRule copies the ConfigMaps or Secrets that match it in a source
// namespace into target namespaces and keeps the copies equal to their
// sources: a changed source, a new or relabelled namespace, and an edited or
// deleted copy are acted on at once. Copies keep the source's data, type and
// labels. Copies of sources that are deleted or stop matching, and copies in
// namespaces that stop being targets, are deleted, as are all of the rule's
// copies when the rule is deleted; objects the rule did not create are never
// deleted. It is Ready when every intended copy is in sync. It has no
// connection details, so spec.writeConnectionSecretToRef is refused.
// +kubebuilder:printcolumn:name="KIND",type="string",JSONPath=".spec.forProvider.kind"
// +kubebuilder:printcolumn:name="SOURCES",type="integer",JSONPath=".status.atProvider.sources"
// +kubebuilder:printcolumn:name="IN-SYNC",type="string",JSONPath=".status.atProvider.copies"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,clusterops}
type CopyRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CopyRuleSpec   `json:"spec"`
	Status CopyRuleStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// CopyRuleList contains a list of CopyRule.
type CopyRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CopyRule `json:"items"`
}
