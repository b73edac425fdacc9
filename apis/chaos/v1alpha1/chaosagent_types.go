package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
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

	// QuietWindows are times when the agent does nothing. A window whose end
	// is before its start runs past midnight into the next day; one whose end
	// equals its start lasts the whole day.
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

	// SteadyState says what healthy means in the target namespaces. Before
	// every round the agent checks it, and while it does not hold the agent
	// pauses: it takes no action, sets the Acting condition to False with
	// reason SteadyStateViolated and records an event saying which workload
	// or pod broke it. It resumes at the first round at which it holds again.
	// Without it, the agent acts whatever the state of its targets.
	// +optional
	SteadyState *SteadyState `json:"steadyState,omitempty"`

	// RecoveryTimeout bounds how long a workload the agent disturbed may take
	// to be whole again. For every pod it kills that belongs to a Deployment
	// or StatefulSet, and every Deployment it scales, the agent measures the
	// time until the workload has all its desired replicas updated and
	// available again, and reports it per workload in status.atProvider.verdicts
	// and in the metric clusterops_chaos_recovery_seconds. An action the
	// workload has not recovered from within recoveryTimeout counts as
	// unrecovered (metric clusterops_chaos_unrecovered_total). Between 1s and
	// 24h.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="recoveryTimeout is a duration such as 30s, 5m or 1h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('24h'))",message="recoveryTimeout must be between 1s and 24h"
	RecoveryTimeout *metav1.Duration `json:"recoveryTimeout,omitempty"`
}

// SteadyState is what healthy means in an agent's target namespaces, in
// signals Kubernetes already reports. Every check that is set must hold.
// +kubebuilder:validation:XValidation:rule="has(self.minAvailablePercent) || (has(self.noCrashLoops) && self.noCrashLoops)",message="steadyState: set minAvailablePercent, noCrashLoops: true, or both; an empty steadyState guards nothing"
type SteadyState struct {
	// MinAvailablePercent holds while every Deployment and StatefulSet in the
	// target namespaces that selector matches has at least this percent of
	// its desired replicas available (rounded up: 50 of 3 replicas needs 2).
	// Workloads scaled to zero always hold. A Deployment cancerMode just
	// scaled up counts its new replicas too, so the agent waits until they
	// are available. 1 to 100.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MinAvailablePercent *int32 `json:"minAvailablePercent,omitempty"`

	// NoCrashLoops holds while no pod in the target namespaces that selector
	// matches has a container (or init container) waiting in
	// CrashLoopBackOff.
	// +optional
	NoCrashLoops bool `json:"noCrashLoops,omitempty"`

	// Selector narrows the Deployments, StatefulSets and pods the checks look
	// at to those whose labels match. Without it, all of them in the target
	// namespaces are looked at, whatever the mode selectors say.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="steadyState.selector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// AnnotationStop is the kill switch. Set on a Namespace, no ChaosAgent acts
// in that namespace; set on the ClusterProviderConfig or ProviderConfig an
// agent uses, that agent acts nowhere. Any value but "false" stops; the value
// is quoted in the agent's status as the reason, so say why, for example
// kubectl annotate namespace shop chaos.clusterops.io/stop="INC-4711". Both
// switches are checked before every single action, not only at the next
// round.
const AnnotationStop = Group + "/stop"

// TypeActing is the condition that says whether a ChaosAgent acts: True
// while its rounds may act, False with one of the Reason* below while it is
// stopped or paused. It leaves Ready alone: a stopped agent is healthy.
const TypeActing xpv2.ConditionType = "Acting"

// Reasons of the Acting condition.
const (
	ReasonActing              xpv2.ConditionReason = "Acting"
	ReasonQuietWindow         xpv2.ConditionReason = "QuietWindow"
	ReasonStoppedByConfig     xpv2.ConditionReason = "StoppedByConfig"
	ReasonStoppedByNamespace  xpv2.ConditionReason = "StoppedByNamespace"
	ReasonSteadyStateViolated xpv2.ConditionReason = "SteadyStateViolated"
)

// A Weekday names a day of the week, in full or by its first three letters.
// The type is shared with ConfigRollout's rollout windows.
type Weekday = apisv1alpha1.Weekday

// A QuietWindow is a time of day, on some days of the week, when the agent
// does nothing. It is the TimeWindow that ConfigRollout's rollout windows use
// too, parsed and evaluated by the same code.
type QuietWindow = apisv1alpha1.TimeWindow

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

// A ChaosRound is a round a ChaosAgent has begun to act in.
type ChaosRound struct {
	// Number of the round: roundsRun once the round is recorded.
	Number int64 `json:"number"`

	// StartedAt is when the round began; the next round is due an interval
	// later.
	StartedAt metav1.Time `json:"startedAt"`

	// Planned is how many actions the round planned to take.
	// +optional
	Planned int32 `json:"planned,omitempty"`
}

// ChaosAgentObservation is the observed state of a ChaosAgent.
type ChaosAgentObservation struct {
	// RoundsRun counts the rounds the agent ran, quiet ones excluded.
	// +optional
	RoundsRun int64 `json:"roundsRun,omitempty"`

	// LastRoundTime is when the last round ran.
	// +optional
	LastRoundTime *metav1.Time `json:"lastRoundTime,omitempty"`

	// RoundUnderWay is the round the agent has begun to act in and not yet
	// recorded as finished. It is written, conditional on the agent's
	// resourceVersion, before the round's first action, and cleared when the
	// round is recorded. A provider replica that finds it set (its holder
	// stopped, restarted or handed the agent over mid-round) never runs
	// that round again: it records it as cut short, and the next round is
	// due an interval after its start. Absent while no round acts.
	// +optional
	RoundUnderWay *ChaosRound `json:"roundUnderWay,omitempty"`

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

	// Plan is what the last round would have done, in the shape every kind
	// reports its plan in, while the agent only dry-runs (dryRun, or
	// management policies that are only Observe); empty otherwise.
	// +optional
	Plan *apisv1alpha1.Plan `json:"plan,omitempty"`

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

	// StoppedNamespaces are the target namespaces the last round left alone
	// because they carry the chaos.clusterops.io/stop annotation; at most 64
	// are listed.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	StoppedNamespaces []string `json:"stoppedNamespaces,omitempty"`

	// Verdicts say, per workload the agent disturbed, how quickly it was
	// whole again; at most 20 workloads are kept, those disturbed longest
	// ago are dropped first.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Verdicts []WorkloadVerdict `json:"verdicts,omitempty"`
}

// Verdicts of a workload, as recorded in status.atProvider.verdicts.
const (
	// VerdictResilient: the workload recovered from the latest action it has
	// settled within recoveryTimeout, and none is pending.
	VerdictResilient = "Resilient"
	// VerdictRecovering: the workload has not yet recovered from an action,
	// and recoveryTimeout has not passed.
	VerdictRecovering = "Recovering"
	// VerdictUnrecovered: the latest action settled ran out of
	// recoveryTimeout before the workload was whole again.
	VerdictUnrecovered = "Unrecovered"
)

// A WorkloadVerdict is how a workload the agent disturbed came back. A
// workload is whole when its controller has seen its latest spec and all its
// desired replicas are updated and available.
type WorkloadVerdict struct {
	// Kind of the workload: Deployment or StatefulSet.
	Kind string `json:"kind"`
	// Namespace and Name of the workload.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`

	// Verdict is Resilient, Recovering or Unrecovered.
	Verdict string `json:"verdict"`

	// Disruptions counts the agent's actions on the workload: pods killed and
	// scale-ups.
	// +optional
	Disruptions int64 `json:"disruptions,omitempty"`
	// Recovered counts the actions the workload recovered from within
	// recoveryTimeout.
	// +optional
	Recovered int64 `json:"recovered,omitempty"`
	// Unrecovered counts the actions it did not recover from within
	// recoveryTimeout.
	// +optional
	Unrecovered int64 `json:"unrecovered,omitempty"`

	// RecentRecoveries are the times to recover after the latest actions,
	// newest last; at most 10 are kept. They are measured when the agent
	// looks, every tenth of its interval (at least 1s, at most 10s) while a
	// recovery is pending, so each may be late by up to that much; none is
	// shorter than 1s, as a workload's status lags its pods by a moment.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	RecentRecoveries []metav1.Duration `json:"recentRecoveries,omitempty"`
	// P50 is the median of recentRecoveries.
	// +optional
	P50 *metav1.Duration `json:"p50,omitempty"`
	// Max is the longest of recentRecoveries.
	// +optional
	Max *metav1.Duration `json:"max,omitempty"`

	// Pending are the times of the actions the workload has not recovered
	// from yet; at most 10, the oldest settled as unrecovered first.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Pending []metav1.MicroTime `json:"pending,omitempty"`

	// LastDisruptionTime is when the agent last disturbed the workload.
	LastDisruptionTime metav1.Time `json:"lastDisruptionTime"`
	// LastRecoveryTime is when the workload was last seen whole again after
	// an action.
	// +optional
	LastRecoveryTime *metav1.Time `json:"lastRecoveryTime,omitempty"`
	// LastUnrecoveredTime is when an action last ran out of recoveryTimeout.
	// +optional
	LastUnrecoveredTime *metav1.Time `json:"lastUnrecoveredTime,omitempty"`
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
// changed when it is deleted. It pauses while its steadyState does not hold,
// stops before its next action once its namespace or its config carries the
// chaos.clusterops.io/stop annotation, and reports per disturbed workload how
// long it took to recover. It has no connection details, so
// spec.writeConnectionSecretToRef is refused.
// +kubebuilder:printcolumn:name="TANTRUM",type="boolean",JSONPath=".spec.forProvider.tantrumMode"
// +kubebuilder:printcolumn:name="TOLERANCE",type="integer",JSONPath=".spec.forProvider.podTolerance"
// +kubebuilder:printcolumn:name="CANCER",type="boolean",JSONPath=".spec.forProvider.cancerMode"
// +kubebuilder:printcolumn:name="IPSUM",type="boolean",JSONPath=".spec.forProvider.ipsumMode"
// +kubebuilder:printcolumn:name="EAGERNESS",type="integer",JSONPath=".spec.forProvider.eagerness"
// +kubebuilder:printcolumn:name="ROUNDS",type="integer",JSONPath=".status.atProvider.roundsRun",priority=1
// +kubebuilder:printcolumn:name="LAST-ROUND",type="string",JSONPath=".status.atProvider.lastRoundSummary",priority=1
// +kubebuilder:printcolumn:name="ACTING",type="string",JSONPath=".status.conditions[?(@.type=='Acting')].status"
// +kubebuilder:printcolumn:name="WHY",type="string",JSONPath=".status.conditions[?(@.type=='Acting')].reason",priority=1
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="PLAN",type="string",JSONPath=".status.atProvider.plan.summary"
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
