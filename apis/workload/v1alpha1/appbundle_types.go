package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

// ServiceType says whether and how an AppBundle exposes its port.
// +kubebuilder:validation:Enum=None;ClusterIP;NodePort
type ServiceType string

// Service types.
const (
	ServiceNone      ServiceType = "None"
	ServiceClusterIP ServiceType = "ClusterIP"
	ServiceNodePort  ServiceType = "NodePort"
)

// PVCDeletionPolicy says what happens to the data claim when its AppBundle is
// deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type PVCDeletionPolicy string

// PVC deletion policies.
const (
	PVCRetain PVCDeletionPolicy = "Retain"
	PVCDelete PVCDeletionPolicy = "Delete"
)

// AppBundleParameters are the configurable fields of an AppBundle.
// +kubebuilder:validation:XValidation:rule="!has(self.service) || self.service == 'None' || has(self.port)",message="a service needs spec.forProvider.port"
type AppBundleParameters struct {
	// Image the Deployment runs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.trim() == self && !self.contains(' ')",message="image must not contain spaces"
	Image string `json:"image"`

	// Replicas of the Deployment. Unset leaves the count to others, such as a
	// HorizontalPodAutoscaler.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Port the container listens on; also the Service's port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`

	// Service exposes the port: None (default), ClusterIP or NodePort.
	// +optional
	// +kubebuilder:default=None
	Service ServiceType `json:"service,omitempty"`

	// Env sets environment variables in the container.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Resources the container requests and is limited to.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// Storage is the PersistentVolumeClaim <name>-data mounted into the pod.
	// +optional
	// +kubebuilder:default={}
	Storage Storage `json:"storage,omitempty"`

	// PVCDeletionPolicy: Retain (default) keeps the claim, and its data, when
	// the AppBundle is deleted; an AppBundle of the same name created later
	// uses it again. Delete deletes it.
	// +optional
	// +kubebuilder:default=Retain
	PVCDeletionPolicy PVCDeletionPolicy `json:"pvcDeletionPolicy,omitempty"`

	// AdoptExisting lets the AppBundle take over a Deployment, claim or
	// Service of the same name that it did not create. Without it, such an
	// object is reported and left alone.
	// +optional
	AdoptExisting bool `json:"adoptExisting,omitempty"`
}

// Storage of an AppBundle.
type Storage struct {
	// Size of the claim. It can grow where the storage class allows volume
	// expansion; it can never shrink.
	// +optional
	// +kubebuilder:default="1Gi"
	Size *resource.Quantity `json:"size,omitempty"`

	// AccessModes of the claim. Immutable once the claim exists.
	// +optional
	// +kubebuilder:default={"ReadWriteOnce"}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:Enum=ReadWriteOnce;ReadOnlyMany;ReadWriteMany;ReadWriteOncePod
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`

	// StorageClassName of the claim; unset uses the cluster's default class.
	// Immutable once the claim exists.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// MountPath of the claim in the container.
	// +optional
	// +kubebuilder:default="/data"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="storage.mountPath is an absolute path such as /data"
	MountPath string `json:"mountPath,omitempty"`
}

// AppBundleObservation is the observed state of an AppBundle.
type AppBundleObservation struct {
	// ReadyReplicas of the Deployment.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Replicas the Deployment wants.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// PVCPhase is the phase of the data claim: Pending, Bound or Lost.
	// +optional
	PVCPhase corev1.PersistentVolumeClaimPhase `json:"pvcPhase,omitempty"`

	// PVCCapacity is the size the claim is bound with.
	// +optional
	PVCCapacity string `json:"pvcCapacity,omitempty"`

	// ServiceAddress is where the Service listens: clusterIP:port, or
	// NodePort <port> on every node.
	// +optional
	ServiceAddress string `json:"serviceAddress,omitempty"`

	// RecentDrift lists, newest first, the last five changes other writers
	// made to objects this resource keeps, which the provider repaired.
	// +optional
	// +kubebuilder:validation:MaxItems=5
	RecentDrift []apisv1alpha1.Drift `json:"recentDrift,omitempty"`

	// Plan lists the objects it would create, update or delete, while spec.managementPolicies
	// is only Observe; empty otherwise.
	// +optional
	Plan *apisv1alpha1.Plan `json:"plan,omitempty"`
}

// Keys of an AppBundle's connection details, which it writes to the Secret
// that spec.writeConnectionSecretToRef names. Without a Service (service:
// None) they are empty.
const (
	// AppBundleEndpointKey is the Service's in-cluster DNS name,
	// <name>.<namespace>.svc, of the cluster the AppBundle acts on.
	AppBundleEndpointKey = "endpoint"
	// AppBundlePortKey is the Service's port, in decimal.
	AppBundlePortKey = "port"
	// AppBundleClusterIPKey is the Service's cluster IP.
	AppBundleClusterIPKey = "clusterIP"
)

// An AppBundleSpec defines the desired state of an AppBundle.
type AppBundleSpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`
	ForProvider              AppBundleParameters `json:"forProvider"`
}

// An AppBundleStatus represents the observed state of an AppBundle.
type AppBundleStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 AppBundleObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// An AppBundle runs one image as a Deployment named after the AppBundle, with
// a PersistentVolumeClaim <name>-data mounted into its pods and optionally a
// Service, all in the AppBundle's namespace. Edits to or deletion of these
// objects are repaired at once. It is Ready when the Deployment is Available.
// Its connection details (spec.writeConnectionSecretToRef) are where its
// Service answers in the cluster: endpoint, the DNS name
// <name>.<namespace>.svc; port; and clusterIP; all empty without a Service.
// +kubebuilder:printcolumn:name="IMAGE",type="string",JSONPath=".spec.forProvider.image"
// +kubebuilder:printcolumn:name="READY-REPLICAS",type="integer",JSONPath=".status.atProvider.readyReplicas"
// +kubebuilder:printcolumn:name="PVC",type="string",JSONPath=".status.atProvider.pvcPhase"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="SERVICE",type="string",JSONPath=".status.atProvider.serviceAddress",priority=1
// +kubebuilder:printcolumn:name="PLAN",type="string",JSONPath=".status.atProvider.plan.summary"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,clusterops}
type AppBundle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AppBundleSpec   `json:"spec"`
	Status AppBundleStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AppBundleList contains a list of AppBundle.
type AppBundleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AppBundle `json:"items"`
}
