package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// ChaosAgentParameters are the configurable fields of a ChaosAgent.
// +kubebuilder:validation:XValidation:rule="(has(self.tantrumMode) && self.tantrumMode) || (has(self.cancerMode) && self.cancerMode) || (has(self.ipsumMode) && self.ipsumMode)",message="enable at least one of tantrumMode, cancerMode or ipsumMode"
type ChaosAgentParameters struct {
	// TantrumMode deletes random pods (evicts them while
	// respectDisruptionBudgets is on).
	// +optional
	// +kubebuilder:default=false
	TantrumMode bool `json:"tantrumMode,omitempty"`

	// PodTolerance is how many candidate pods there must be, at least, for a
	// tantrum to kill one: fewer, and the agent leaves them alone.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	PodTolerance int32 `json:"podTolerance,omitempty"`

	// CancerMode doubles the replicas of random Deployments, up to
	// maxReplicas. Deployments scaled to zero are left alone.
	// +optional
	// +kubebuilder:default=false
	CancerMode bool `json:"cancerMode,omitempty"`

	// MaxReplicas caps the replicas cancerMode scales a Deployment to.
	// +optional
	// +kubebuilder:default=128
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxReplicas int32 `json:"maxReplicas,omitempty"`

	// IpsumMode overwrites the data of random ConfigMaps with lorem ipsum.
	// Immutable ConfigMaps, kube-root-ca.crt and ConfigMaps of this
	// provider's other kinds are never touched; the original data is backed
	// up first, in the ConfigMap <name>-chaos-backup next to the agent.
	// +optional
	// +kubebuilder:default=false
	IpsumMode bool `json:"ipsumMode,omitempty"`

	// Eagerness is the chance, in percent, that each action of a round
	// happens.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Eagerness int32 `json:"eagerness,omitempty"`

	// ExcludedNamespaces are never acted in, even when targeted. Names or
	// glob patterns such as team-prod-*.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9*?]([-a-z0-9*?]*[a-z0-9*?])?$')",message="excludedNamespaces: a namespace pattern is lowercase letters, digits, '-' and the wildcards '*' and '?', and starts and ends with one of those but '-'"
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`

	// Namespaces the agent acts in. Without namespaces and namespaceSelector,
	// it acts in its own namespace only. Namespaces other than its own must
	// be in the reach of its ClusterProviderConfig; kube-system, kube-public,
	// kube-node-lease and the provider's namespace are never acted in unless
	// the ClusterProviderConfig explicitly grants them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="namespaces: a namespace name is lowercase letters, digits and '-', and starts and ends with a letter or digit"
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector adds the namespaces whose labels match.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="namespaceSelector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// PodSelector narrows tantrums to the pods whose labels match. Without
	// it, every pod in the target namespaces is a candidate.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="podSelector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist"
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// DeploymentSelector narrows cancerMode to the Deployments whose labels
	// match. Without it, every Deployment in the target namespaces is a
	// candidate.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="deploymentSelector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist"
	DeploymentSelector *metav1.LabelSelector `json:"deploymentSelector,omitempty"`

	// ConfigMapSelector narrows ipsumMode to the ConfigMaps whose labels
	// match. Without it, every ConfigMap in the target namespaces is a
	// candidate.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="configMapSelector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist"
	ConfigMapSelector *metav1.LabelSelector `json:"configMapSelector,omitempty"`

	// Interval between rounds, at least 1s.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="interval is a duration such as 1s, 30s, 5m or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') || duration(self) >= duration('1s')",message="interval must be at least 1s"
	Interval metav1.Duration `json:"interval,omitempty"`

	// MaxActionsPerRound caps the actions of one round, across all modes.
	// Each action is rolled against eagerness on its own.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxActionsPerRound int32 `json:"maxActionsPerRound,omitempty"`

	// MinPodAge spares pods younger than this.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="minPodAge is a duration such as 30s, 5m or 1h"
	MinPodAge *metav1.Duration `json:"minPodAge,omitempty"`

	// RespectDisruptionBudgets kills pods through the Eviction API, so the
	// API server refuses what a PodDisruptionBudget does not allow; a refusal
	// is reported, never forced. Off, pods are deleted outright.
	// +optional
	// +kubebuilder:default=true
	RespectDisruptionBudgets *bool `json:"respectDisruptionBudgets,omitempty"`

	// QuietWindows are times when the agent does nothing.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	QuietWindows []QuietWindow `json:"quietWindows,omitempty"`

	// DryRun records what the agent would do, in status and events, and
	// changes nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Seed makes the agent's choices repeatable: the same seed, round and
	// cluster state give the same choices. Without it, every round draws a
	// new seed.
	// +optional
	Seed *int64 `json:"seed,omitempty"`

	// RevertOnDelete restores, when the agent is deleted, the replicas of
	// every Deployment and the data of every ConfigMap it changed that still
	// differ from the original, then removes its backup. Killed pods are not
	// revived: their controllers replace them.
	// +optional
	// +kubebuilder:default=true
	RevertOnDelete *bool `json:"revertOnDelete,omitempty"`
}

// A Weekday names a day of the week, in full or by its first three letters.
// +kubebuilder:validation:Enum=Monday;Tuesday;Wednesday;Thursday;Friday;Saturday;Sunday;Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// A QuietWindow is a time of day, on some days of the week, when the agent
// does nothing. A window whose end is before its start runs past midnight
// into the next day; one whose end equals its start lasts the whole day.
// +kubebuilder:validation:XValidation:rule="self.start.matches('^([01][0-9]|2[0-3]):[0-5][0-9]$') && self.end.matches('^([01][0-9]|2[0-3]):[0-5][0-9]$')",message="quietWindows[].start and end are times of day as HH:MM, such as 09:00 or 17:30"
// +kubebuilder:validation:XValidation:rule="has(self.timeZone) && self.timeZone.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$')",message="quietWindows[].timeZone is an IANA time zone such as UTC or Europe/Berlin"
type QuietWindow struct {
	// Days the window starts on; every day when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Days []Weekday `json:"days,omitempty"`

	// Start is the time of day the window opens, as HH:MM.
	// +kubebuilder:validation:MaxLength=5
	Start string `json:"start"`

	// End is the time of day the window closes, as HH:MM.
	// +kubebuilder:validation:MaxLength=5
	End string `json:"end"`

	// TimeZone of start and end, an IANA name such as Europe/Berlin.
	// +optional
	// +kubebuilder:default="UTC"
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// Actions a ChaosAgent takes, as recorded in status.atProvider.recentActions.
const (
	ActionDeletePod        = "DeletePod"
	ActionEvictPod         = "EvictPod"
	ActionEvictionRefused  = "EvictionRefused"
	ActionScaleDeployment  = "ScaleDeployment"
	ActionRewriteConfigMap = "RewriteConfigMap"
)

// A ChaosAction is one thing a ChaosAgent did, or would have done.
type ChaosAction struct {
	// Time of the action.
	Time metav1.Time `json:"time"`

	// Action is DeletePod, EvictPod, EvictionRefused, ScaleDeployment or
	// RewriteConfigMap.
	Action string `json:"action"`

	// Namespace and Name of the object acted on.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`

	// Before and After describe the object's state around the action: a
	// pod's phase, a Deployment's replicas, a digest of a ConfigMap's data
	// (never the data).
	// +optional
	Before string `json:"before,omitempty"`
	// +optional
	After string `json:"after,omitempty"`

	// DryRun is true when the action was only recorded, not taken.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// ChaosAgentObservation is the observed state of a ChaosAgent.
type ChaosAgentObservation struct {
	// RoundsRun counts the rounds the agent ran, quiet ones excluded.
	// +optional
	RoundsRun int64 `json:"roundsRun,omitempty"`

	// LastRoundTime is when the last round ran.
	// +optional
	LastRoundTime *metav1.Time `json:"lastRoundTime,omitempty"`

	// NextRoundTime is when the next round is due.
	// +optional
	NextRoundTime *metav1.Time `json:"nextRoundTime,omitempty"`

	// PodsKilled counts pods deleted or evicted.
	// +optional
	PodsKilled int64 `json:"podsKilled,omitempty"`

	// DeploymentsScaled counts Deployment scale-ups.
	// +optional
	DeploymentsScaled int64 `json:"deploymentsScaled,omitempty"`

	// ConfigMapsRewritten counts ConfigMaps overwritten with lorem ipsum.
	// +optional
	ConfigMapsRewritten int64 `json:"configMapsRewritten,omitempty"`

	// Refused counts evictions a PodDisruptionBudget refused.
	// +optional
	Refused int64 `json:"refused,omitempty"`

	// RecentActions are the latest actions, newest last; at most 20 are kept.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	RecentActions []ChaosAction `json:"recentActions,omitempty"`

	// TargetNamespaces are the namespaces the last round acted in.
	// +optional
	TargetNamespaces []string `json:"targetNamespaces,omitempty"`

	// LastRoundSummary says what the last round did, or why it did nothing.
	// +optional
	LastRoundSummary string `json:"lastRoundSummary,omitempty"`
}

// A ChaosAgentSpec defines the desired state of a ChaosAgent. A ChaosAgent
// has no connection details: spec.writeConnectionSecretToRef is refused.
// +kubebuilder:validation:XValidation:rule="!has(self.writeConnectionSecretToRef)",message="a ChaosAgent has no connection details: remove spec.writeConnectionSecretToRef"
type ChaosAgentSpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`
	ForProvider              ChaosAgentParameters `json:"forProvider"`
}

// A ChaosAgentStatus represents the observed state of a ChaosAgent.
type ChaosAgentStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 ChaosAgentObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// A ChaosAgent runs controlled chaos every interval: it kills random pods
// (tantrumMode), doubles the replicas of random Deployments (cancerMode) and
// overwrites random ConfigMaps with lorem ipsum (ipsumMode), only in the
// namespaces it may reach, within the limits it is given, and reverts what it
// changed when it is deleted. It has no connection details, so
// spec.writeConnectionSecretToRef is refused.
// +kubebuilder:printcolumn:name="TANTRUM",type="boolean",JSONPath=".spec.forProvider.tantrumMode"
// +kubebuilder:printcolumn:name="TOLERANCE",type="integer",JSONPath=".spec.forProvider.podTolerance"
// +kubebuilder:printcolumn:name="CANCER",type="boolean",JSONPath=".spec.forProvider.cancerMode"
// +kubebuilder:printcolumn:name="IPSUM",type="boolean",JSONPath=".spec.forProvider.ipsumMode"
// +kubebuilder:printcolumn:name="EAGERNESS",type="integer",JSONPath=".spec.forProvider.eagerness"
// +kubebuilder:printcolumn:name="ROUNDS",type="integer",JSONPath=".status.atProvider.roundsRun",priority=1
// +kubebuilder:printcolumn:name="LAST-ROUND",type="string",JSONPath=".status.atProvider.lastRoundSummary",priority=1
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,clusterops}
type ChaosAgent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ChaosAgentSpec   `json:"spec"`
	Status ChaosAgentStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ChaosAgentList contains a list of ChaosAgent.
type ChaosAgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ChaosAgent `json:"items"`
}
