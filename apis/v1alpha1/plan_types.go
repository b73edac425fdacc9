package v1alpha1

// MaxPlannedActions bounds the actions a Plan lists.
const MaxPlannedActions = 20

// Actions a Plan names.
const (
	ActionCreate  = "Create"
	ActionUpdate  = "Update"
	ActionReplace = "Replace"
	ActionDelete  = "Delete"
	ActionRelease = "Release"
)

// A Plan is what a managed resource would do, reported instead of done while
// its management policies are only Observe. Switching the policies to all
// (*) does what it lists, unless what it reads changes in between.
type Plan struct {
	// Summary counts the actions by kind, such as "Create 2, Update 1", or
	// says "Nothing to do". The PLAN column shows it.
	// +kubebuilder:validation:MaxLength=256
	Summary string `json:"summary"`

	// Actions lists up to 20 of the actions.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Actions []PlannedAction `json:"actions,omitempty"`

	// MoreActions counts the actions beyond those listed.
	// +optional
	MoreActions int32 `json:"moreActions,omitempty"`
}

// A PlannedAction is one write a Plan would make. It names fields, never
// their values.
type PlannedAction struct {
	// Action is Create, Update, Replace (delete and create again), Delete, or
	// Release (take the resource's marks off an object it took over).
	// +kubebuilder:validation:MaxLength=32
	Action string `json:"action"`

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

	// Fields an Update or Replace would change, as paths such as
	// spec.template.spec.containers[0].image or data.key; at most 10.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=512
	Fields []string `json:"fields,omitempty"`

	// Reason says why, where the action alone does not.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
}
