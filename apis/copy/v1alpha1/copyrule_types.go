package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
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
// +kubebuilder:validation:XValidation:rule="!has(self.sourceNamespace) || !has(self.sourceNamespaces)",message="set sourceNamespace or sourceNamespaces, not both: sourceNamespaces lists every source namespace"
// +kubebuilder:validation:XValidation:rule="[has(self.namespaces) && size(self.namespaces) > 0, has(self.namespacePattern), has(self.namespaceSelector), has(self.allNamespaces) && self.allNamespaces].filter(x, x).size() == 1",message="set exactly one of namespaces, namespacePattern, namespaceSelector or allNamespaces: true"
// +kubebuilder:validation:XValidation:rule="!has(self.copyName) || (!has(self.selector) && has(self.names) && size(self.names) == 1)",message="copyName needs exactly one source: one entry in names and no selector (several sources would all be copied to the one name)"
// +kubebuilder:validation:XValidation:rule="!has(self.into) || (self.kind == 'Secret' && (!has(self.apiVersion) || self.apiVersion == 'v1'))",message="into: ConfigMap copies a Secret into a ConfigMap, so it needs kind: Secret; a ConfigMap is never copied into a Secret"
// +kubebuilder:validation:XValidation:rule="!has(self.keys) || (self.kind in ['ConfigMap', 'Secret'] && (!has(self.apiVersion) || self.apiVersion == 'v1'))",message="keys picks keys of a ConfigMap's or a Secret's data; objects of other kinds are copied whole"
// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || self.apiVersion.contains('/') || self.kind in ['ConfigMap', 'Secret', 'LimitRange', 'ResourceQuota', 'ServiceAccount']",messageExpression="'kind ' + self.kind + ' of apiVersion v1 is not copied: of the core kinds, a rule copies ConfigMap, Secret, LimitRange, ResourceQuota and ServiceAccount; Pods run workloads, and the others belong to their namespace or to the cluster'"
// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || !self.apiVersion.contains('/') || !(self.apiVersion.split('/')[0] in ['apps', 'batch', 'autoscaling', 'policy', 'networking.k8s.io', 'rbac.authorization.k8s.io', 'storage.k8s.io', 'apiextensions.k8s.io', 'admissionregistration.k8s.io', 'apiregistration.k8s.io', 'scheduling.k8s.io', 'certificates.k8s.io', 'coordination.k8s.io', 'discovery.k8s.io', 'events.k8s.io', 'node.k8s.io', 'flowcontrol.apiserver.k8s.io', 'authentication.k8s.io', 'authorization.k8s.io', 'resource.k8s.io', 'storagemigration.k8s.io', 'internal.apiserver.k8s.io']) || (self.apiVersion.split('/')[0] + '/' + self.kind) in ['networking.k8s.io/NetworkPolicy', 'rbac.authorization.k8s.io/Role', 'rbac.authorization.k8s.io/RoleBinding', 'policy/PodDisruptionBudget']",messageExpression="'kind ' + self.kind + ' of ' + self.apiVersion + ' is not copied: of the built-in groups, a rule copies NetworkPolicy (networking.k8s.io), Role and RoleBinding (rbac.authorization.k8s.io) and PodDisruptionBudget (policy); workloads run pods, and the other kinds are cluster-scoped or kept by controllers'"
// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || !self.apiVersion.contains('/') || !(self.apiVersion.split('/')[0] == 'clusterops.io' || self.apiVersion.split('/')[0].endsWith('.clusterops.io'))",message="the provider's own kinds are not copied: a copy of a managed resource would act a second time"
// +kubebuilder:validation:XValidation:rule="has(self.into) == has(oldSelf.into) && (!has(self.into) || self.into == oldSelf.into)",message="into is immutable: create another rule"
type CopyRuleParameters struct {
	// Kind of the objects copied, with apiVersion. Besides ConfigMap and
	// Secret, a rule copies LimitRanges, ResourceQuotas and ServiceAccounts
	// (v1), NetworkPolicies (networking.k8s.io/v1), Roles and RoleBindings
	// (rbac.authorization.k8s.io/v1), PodDisruptionBudgets (policy/v1) and
	// any namespaced custom resource. Pods, the workloads that make them, the
	// other built-in kinds and cluster-scoped kinds are refused. The provider
	// needs a grant to read and write any kind but ConfigMaps and Secrets:
	// cluster/rbac/copy-kinds.yaml. It cannot change: a rule's copies are all
	// of one kind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z][A-Za-z0-9]*$')",message="kind is a kind's name as it is written in manifests, such as ConfigMap or NetworkPolicy"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="kind is immutable: create another rule"
	Kind string `json:"kind"`

	// APIVersion of the objects copied: v1 for ConfigMaps and Secrets (the
	// default), or group/version, such as networking.k8s.io/v1. The group
	// cannot change; the version can, for a custom resource that gained one.
	// +optional
	// +kubebuilder:default=v1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$')",message="apiVersion is v1 or group/version, such as networking.k8s.io/v1"
	// +kubebuilder:validation:XValidation:rule="(self.contains('/') ? self.split('/')[0] : '') == (oldSelf.contains('/') ? oldSelf.split('/')[0] : '')",message="the group of apiVersion is immutable: create another rule"
	APIVersion string `json:"apiVersion,omitempty"`

	// SourceNamespace holds the objects to copy. It defaults to the rule's own
	// namespace; another namespace must be within the reach its config grants.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="sourceNamespace: a namespace name is lowercase letters, digits and '-', and starts and ends with a letter or digit"
	SourceNamespace string `json:"sourceNamespace,omitempty"`

	// SourceNamespaces hold the objects to copy, as the original Copyrator's
	// rules listed them: the rule copies what it selects in each of them. Set
	// it or sourceNamespace, not both; with neither, the source is the rule's
	// own namespace. Each must be within the reach of the source side's
	// config. A name found in more than one of them is a conflict: no copy of
	// that name is written (copies already made are left as they are, neither
	// updated nor deleted), the rule reports it in status.atProvider.problems
	// with reason SourceConflict and a Warning event, and copies of that name
	// follow the one remaining source once the conflict goes. A copy's
	// annotation copy.clusterops.io/source names the namespace it came from.
	// When sources and targets are on one cluster, a source namespace is
	// never a target.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="sourceNamespaces: a namespace name is lowercase letters, digits and '-', and starts and ends with a letter or digit"
	SourceNamespaces []string `json:"sourceNamespaces,omitempty"`

	// Source says on which cluster the source namespaces are. Without it the
	// sources are on the cluster spec.providerConfigRef names, as the copies
	// are. With source.providerConfigRef, the rule reads its sources through
	// that config (on the cluster it describes, within the reach it grants)
	// and writes its copies through spec.providerConfigRef, so both clusters'
	// owners consent: each config's reach bounds its side. Nothing is ever
	// written on the source side.
	// +optional
	Source *CopySource `json:"source,omitempty"`

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

	// StaleAfter bounds how long a copy may stay out of sync with its
	// source, its write failing or its source refused, before the rule's
	// Fresh condition turns False with a CopiesStale Warning event. Between
	// 1s and 24h.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="staleAfter is a duration such as 90s, 10m or 1h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('24h'))",message="staleAfter must be between 1s and 24h"
	StaleAfter *metav1.Duration `json:"staleAfter,omitempty"`

	// What a copy holds: keys, name, kind and metadata (issue #19). A change
	// of any of these rewrites the copies that differ, and only those.

	// Keys says which keys of a source's data are copied, and under which
	// names. Unset, every key is copied as it is.
	// +optional
	Keys *CopyKeys `json:"keys,omitempty"`

	// CopyName names the copies when they should not have the source's name.
	// It needs exactly one source: one entry in names and no selector.
	// Changing it deletes the copies of the old name and creates the new ones.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="copyName: an object name is lowercase letters, digits, '-' and '.', and starts and ends with a letter or digit"
	CopyName string `json:"copyName,omitempty"`

	// Into makes the copies of another kind than their sources. The only
	// value is ConfigMap, with kind: Secret: each Secret's keys are copied
	// into a ConfigMap, values that are valid UTF-8 into data, others into
	// binaryData; the Secret's type is not kept.
	// WARNING: the data then becomes readable by whoever can read ConfigMaps
	// in the target namespaces, which is usually far more people and
	// controllers than can read Secrets, and ConfigMaps are not encrypted at
	// rest. Copy only keys that are not secret (use keys.include). A
	// ConfigMap is never copied into a Secret. It cannot change: create
	// another rule.
	// +optional
	// +kubebuilder:validation:Enum=ConfigMap
	Into string `json:"into,omitempty"`

	// Metadata on copies: labels dropped from what the source has, and
	// labels and annotations added to every copy.
	// +optional
	Metadata *CopyMetadata `json:"metadata,omitempty"`
}

// CopyKeys says which keys of a source's data (a ConfigMap's data and
// binaryData, a Secret's data) are copied, and under which names.
// +kubebuilder:validation:XValidation:rule="!has(self.include) || !has(self.exclude) || !self.include.exists(k, k in self.exclude)",message="keys: a key cannot be both included and excluded"
// +kubebuilder:validation:XValidation:rule="!has(self.rename) || !has(self.exclude) || !self.exclude.exists(k, k in self.rename)",message="keys: an excluded key cannot be renamed"
// +kubebuilder:validation:XValidation:rule="!has(self.rename) || !has(self.include) || self.rename.all(k, k in self.include)",message="keys: with include, rename only keys that include lists"
// +kubebuilder:validation:XValidation:rule="!has(self.rename) || self.rename.all(k, self.rename.filter(j, self.rename[j] == self.rename[k]).size() == 1)",message="keys.rename: two keys cannot be renamed to the same key"
// +kubebuilder:validation:XValidation:rule="!has(self.rename) || !has(self.include) || self.rename.all(k, !(self.rename[k] in self.include) || self.rename[k] in self.rename)",message="keys.rename: a new key name collides with a key include copies under its own name; rename that key too, or leave it out of include"
type CopyKeys struct {
	// Include lists the only keys copied. Unset, every key is, but those
	// Exclude lists. Keys a source lacks are skipped. An empty list, which
	// would copy no key at all, is refused.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="keys.include: a key is letters, digits, '-', '_' and '.'"
	Include []string `json:"include,omitempty"`

	// Exclude lists keys that are not copied.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="keys.exclude: a key is letters, digits, '-', '_' and '.'"
	Exclude []string `json:"exclude,omitempty"`

	// Rename maps a source's key to the key it has in the copies, e.g.
	// {password: DB_PASSWORD}. A source whose own key has the new name (and
	// is copied under it) is not copied, and is reported: rename or exclude
	// that key too.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$'))",message="keys.rename: keys and new names are letters, digits, '-', '_' and '.', at most 253 of them"
	Rename map[string]DataKey `json:"rename,omitempty"`
}

// A DataKey is a key of a ConfigMap's or a Secret's data.
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="keys.rename: keys and new names are letters, digits, '-', '_' and '.', at most 253 of them"
type DataKey string

// A LabelValue is the value of a label.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')",message="metadata.labels: a value is at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, or empty"
type LabelValue string

// An AnnotationValue is the value of an annotation.
// +kubebuilder:validation:MaxLength=4096
type AnnotationValue string

// CopyMetadata is what a rule changes in the metadata of its copies. Copies
// keep the source's labels but those dropped here and those in the
// provider's domains (clusterops.io and its subdomains: a mark of the
// provider belongs to the object it marks, not to a copy). The labels and
// annotations the provider marks its copies with can be neither dropped nor
// set here.
type CopyMetadata struct {
	// DropLabels lists label keys of the source the copies do not get, e.g.
	// argocd.argoproj.io/instance, whose GitOps tool would otherwise take
	// the copies for its own and prune them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('^([^/]*[.])?clusterops[.]io/')",message="metadata.dropLabels: the provider's own labels (clusterops.io domains) are never dropped"
	DropLabels []string `json:"dropLabels,omitempty"`

	// DropLabelPrefixes drops every label of the source whose key starts
	// with one of these, e.g. "app.kubernetes.io/" or "argocd.argoproj.io/".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('^([^/]*[.])?clusterops[.]io/')",message="metadata.dropLabelPrefixes: the provider's own labels (clusterops.io domains) are never dropped"
	DropLabelPrefixes []string `json:"dropLabelPrefixes,omitempty"`

	// Labels are added to every copy, over the source's labels of the same
	// keys.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*[.])?clusterops[.]io/'))",message="metadata.labels: keys in the provider's domains (clusterops.io) are its own and cannot be set"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="metadata.labels: a key is an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// Annotations are added to every copy. When one is removed here, it is
	// removed from the copies too.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*[.])?clusterops[.]io/'))",message="metadata.annotations: keys in the provider's domains (clusterops.io) are its own and cannot be set"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="metadata.annotations: a key is an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	Annotations map[string]AnnotationValue `json:"annotations,omitempty"`
}

// A CopySource names where a CopyRule reads its sources.
type CopySource struct {
	// ProviderConfigRef names the ProviderConfig (in the rule's namespace) or
	// ClusterProviderConfig whose cluster and reach the sources are read
	// through: the source side of a cross-cluster copy. spec.providerConfigRef
	// stays the side the copies are written to, as for every managed
	// resource. The config is in use, and cannot be deleted, while the rule
	// names it.
	ProviderConfigRef SourceProviderConfigReference `json:"providerConfigRef"`
}

// A SourceProviderConfigReference names a ProviderConfig or a
// ClusterProviderConfig.
type SourceProviderConfigReference struct {
	// Kind of the config: ProviderConfig (in the rule's namespace) or
	// ClusterProviderConfig.
	// +kubebuilder:validation:Enum=ProviderConfig;ClusterProviderConfig
	Kind string `json:"kind"`
	// Name of the config.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// TypeFresh is the condition that says whether every copy that can be
// written matches its source, or has been out of sync for longer than
// staleAfter (reason Stale).
const TypeFresh xpv2.ConditionType = "Fresh"

// Reasons of the Fresh condition.
const (
	ReasonInSync     xpv2.ConditionReason = "InSync"
	ReasonCatchingUp xpv2.ConditionReason = "CatchingUp"
	ReasonStale      xpv2.ConditionReason = "Stale"
)

// Reasons a target is reported as a problem.
const (
	ProblemConflict         = "Conflict"
	ProblemOutOfReach       = "OutOfReach"
	ProblemWriteFailed      = "WriteFailed"
	ProblemRefused          = "Refused"
	ProblemPruneSkipped     = "PruneSkipped"
	ProblemNamespaceMissing = "NamespaceMissing"
	// ProblemSourceConflict is a name that more than one source namespace
	// holds: neither is copied until one of them goes.
	ProblemSourceConflict = "SourceConflict"
)

// A CopyProblem is an object a CopyRule could not keep in sync, and why.
type CopyProblem struct {
	// Namespace and Name of the object (a target copy, or a refused source).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Reason is Conflict, OutOfReach, WriteFailed, Refused, PruneSkipped,
	// NamespaceMissing or SourceConflict (Namespace is then the first source
	// namespace holding the name; the message names them all).
	Reason string `json:"reason"`
	// Message says what happened and what to do.
	Message string `json:"message"`
	// Since is when the object was first found with this problem, and so,
	// for a copy, when it last matched its source or was last attempted.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// An ObservedSource is a source object and the version of it last copied.
type ObservedSource struct {
	// Namespace of the source, on the source side's cluster.
	// +optional
	Namespace       string `json:"namespace,omitempty"`
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
	// OutOfSyncSince is when some copy stopped matching its source, its
	// write failing or its source refused, and none has caught up since:
	// the age of the oldest copy out of sync. Empty while every copy that
	// can be written matches.
	// +optional
	OutOfSyncSince *metav1.Time `json:"outOfSyncSince,omitempty"`
	// SyncedDigest is a digest of what the rule last found in sync: its
	// spec's generation, its clusters and reach, the versions of its sources
	// and copies, and its target namespaces. After a provider restart, a rule
	// whose watches hold the same is known to be in sync without reading its
	// sources and copies again. Empty while the rule is not in sync.
	// +optional
	SyncedDigest string `json:"syncedDigest,omitempty"`

	// RecentDrift lists, newest first, the last five changes other writers
	// made to objects this resource keeps, which the provider repaired.
	// +optional
	// +kubebuilder:validation:MaxItems=5
	RecentDrift []apisv1alpha1.Drift `json:"recentDrift,omitempty"`

	// Plan lists the copies it would create, update, replace, delete or release, while spec.managementPolicies
	// is only Observe; empty otherwise.
	// +optional
	Plan *apisv1alpha1.Plan `json:"plan,omitempty"`
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

// A CopyRule copies the ConfigMaps, Secrets or other namespaced objects
// (spec.forProvider.apiVersion and kind) that match it in one or more
// source namespaces (on the cluster of its config, or of
// spec.forProvider.source.providerConfigRef) into target namespaces and keeps the copies equal to their
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
// +kubebuilder:printcolumn:name="FRESH",type="string",JSONPath=".status.conditions[?(@.type=='Fresh')].reason",priority=1
// +kubebuilder:printcolumn:name="PLAN",type="string",JSONPath=".status.atProvider.plan.summary"
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
