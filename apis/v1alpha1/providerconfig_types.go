package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// Credential sources a config may use.
const (
	// CredentialsSourceInjectedIdentity acts with the provider's own identity:
	// its in-cluster service account, or the kubeconfig it was started with.
	CredentialsSourceInjectedIdentity = xpv2.CredentialsSourceInjectedIdentity
	// CredentialsSourceSecret acts on the cluster described by a kubeconfig
	// stored in a Secret.
	CredentialsSourceSecret = xpv2.CredentialsSourceSecret
)

// ProviderConfigSpec is the desired state of a namespaced ProviderConfig.
// Managed resources that use it act only in their own namespace: a namespaced
// config can never grant reach into other namespaces.
type ProviderConfigSpec struct {
	// Credentials tell the provider which cluster to act on.
	Credentials LocalCredentials `json:"credentials"`
}

// LocalCredentials select the cluster a namespaced ProviderConfig acts on.
// +kubebuilder:validation:XValidation:rule="self.source != 'Secret' || has(self.secretRef)",message="credentials.secretRef is required when credentials.source is Secret"
// +kubebuilder:validation:XValidation:rule="self.source == 'Secret' || !has(self.secretRef)",message="credentials.secretRef is only allowed when credentials.source is Secret"
type LocalCredentials struct {
	// Source of the credentials. InjectedIdentity acts with the provider's own
	// identity on the cluster it runs in; Secret acts on the cluster described
	// by a kubeconfig stored in a Secret.
	// +kubebuilder:validation:Enum=InjectedIdentity;Secret
	Source xpv2.CredentialsSource `json:"source"`

	// SecretRef selects the key of a Secret in this ProviderConfig's namespace
	// that holds a kubeconfig. Required when source is Secret.
	// +optional
	SecretRef *xpv2.LocalSecretKeySelector `json:"secretRef,omitempty"`
}

// ClusterProviderConfigSpec is the desired state of a ClusterProviderConfig.
type ClusterProviderConfigSpec struct {
	// Credentials tell the provider which cluster to act on.
	Credentials ClusterCredentials `json:"credentials"`

	// Reach grants the managed resources that use this config access to
	// namespaces. On the provider's own cluster (source InjectedIdentity) a
	// managed resource also acts in its own namespace, unless denied; on
	// another cluster (source Secret) a namespace named like its own is not
	// its own, and only reach grants it.
	// +optional
	Reach *Reach `json:"reach,omitempty"`
}

// ClusterCredentials select the cluster a ClusterProviderConfig acts on.
// +kubebuilder:validation:XValidation:rule="self.source != 'Secret' || has(self.secretRef)",message="credentials.secretRef is required when credentials.source is Secret"
// +kubebuilder:validation:XValidation:rule="self.source == 'Secret' || !has(self.secretRef)",message="credentials.secretRef is only allowed when credentials.source is Secret"
type ClusterCredentials struct {
	// Source of the credentials. InjectedIdentity acts with the provider's own
	// identity on the cluster it runs in; Secret acts on the cluster described
	// by a kubeconfig stored in a Secret.
	// +kubebuilder:validation:Enum=InjectedIdentity;Secret
	Source xpv2.CredentialsSource `json:"source"`

	// SecretRef selects the key of a Secret that holds a kubeconfig. Required
	// when source is Secret.
	// +optional
	SecretRef *xpv2.SecretKeySelector `json:"secretRef,omitempty"`
}

// Reach is the set of namespaces a managed resource may act in through a
// ClusterProviderConfig. A namespace is reachable when it matches namespaces
// or namespaceSelector and is not denied; the denials and the provider's
// namespace win over every grant, the managed resource's own namespace
// included.
// +kubebuilder:validation:XValidation:rule="!has(self.namespaceSelector) || !has(self.namespaceSelector.matchExpressions) || self.namespaceSelector.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="reach.namespaceSelector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist"
// +kubebuilder:validation:XValidation:rule="!has(self.namespaceSelector) || !has(self.namespaceSelector.matchExpressions) || self.namespaceSelector.matchExpressions.all(e, e.operator in ['Exists', 'DoesNotExist'] ? (!has(e.values) || size(e.values) == 0) : (has(e.values) && size(e.values) > 0))",message="reach.namespaceSelector.matchExpressions[]: In and NotIn need values, Exists and DoesNotExist take none"
type Reach struct {
	// Namespaces lists namespace names or glob patterns ('*' matches any run
	// of characters, '?' one character), such as team-* .
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9*?]([-a-z0-9*?]*[a-z0-9*?])?$')",message="reach.namespaces: a namespace pattern is lowercase letters, digits, '-' and the wildcards '*' and '?', and starts and ends with one of those but '-'"
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector selects namespaces by their labels.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// DeniedNamespaces are never reachable, even when matched above or when
	// a managed resource lives in one. Names or glob patterns. The
	// provider's own namespace is always denied as well.
	// Set it to an empty list to deny nothing but the provider's namespace.
	// +optional
	// +listType=set
	// +kubebuilder:default={"kube-system","kube-public","kube-node-lease"}
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9*?]([-a-z0-9*?]*[a-z0-9*?])?$')",message="reach.deniedNamespaces: a namespace pattern is lowercase letters, digits, '-' and the wildcards '*' and '?', and starts and ends with one of those but '-'"
	DeniedNamespaces []string `json:"deniedNamespaces,omitempty"`
}

// ProviderConfigStatus is the observed state of a ProviderConfig or
// ClusterProviderConfig.
type ProviderConfigStatus struct {
	xpv2.ProviderConfigStatus `json:",inline"`
}

// +kubebuilder:object:root=true

// A ProviderConfig tells the managed resources of its namespace which cluster
// to act on. They act only in their own namespace.
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="SOURCE",type="string",JSONPath=".spec.credentials.source"
// +kubebuilder:printcolumn:name="USERS",type="integer",JSONPath=".status.users"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="SECRET-NAME",type="string",JSONPath=".spec.credentials.secretRef.name",priority=1
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,provider,clusterops}
type ProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderConfigSpec   `json:"spec"`
	Status ProviderConfigStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ProviderConfigList contains a list of ProviderConfig.
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfig `json:"items"`
}

// +kubebuilder:object:root=true

// A ClusterProviderConfig tells managed resources in any namespace which
// cluster to act on, and may grant them reach into other namespaces. Managed
// resources use the ClusterProviderConfig named default unless they say
// otherwise.
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="SOURCE",type="string",JSONPath=".spec.credentials.source"
// +kubebuilder:printcolumn:name="USERS",type="integer",JSONPath=".status.users"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="SECRET-NAME",type="string",JSONPath=".spec.credentials.secretRef.name",priority=1
// +kubebuilder:resource:scope=Cluster,categories={crossplane,provider,clusterops}
type ClusterProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterProviderConfigSpec `json:"spec"`
	Status ProviderConfigStatus      `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterProviderConfigList contains a list of ClusterProviderConfig.
type ClusterProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProviderConfig `json:"items"`
}
