package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// MaxRecentDrift bounds a managed resource's status.atProvider.recentDrift,
// and MaxDriftFields the fields each entry lists.
const (
	MaxRecentDrift = 5
	MaxDriftFields = 10
)

// DriftDeleted is the one field of a Drift whose object another writer
// deleted, and which the provider made again.
const DriftDeleted = "(deleted)"

// A Drift is a change another writer made to an object a managed resource
// keeps, and which the provider repaired. It names fields, never their values.
type Drift struct {
	// Time the provider repaired the object.
	Time metav1.Time `json:"time"`

	// Kind of the object, such as Deployment or ConfigMap.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// Namespace of the object.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// Name of the object.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Fields that differed from what the managed resource wants, as paths
	// such as spec.template.spec.containers[0].image or data[tls.crt];
	// (deleted) when the object itself was deleted. At most 10.
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=512
	Fields []string `json:"fields"`

	// MoreFields counts the differing fields beyond those listed.
	// +optional
	MoreFields int32 `json:"moreFields,omitempty"`
}
