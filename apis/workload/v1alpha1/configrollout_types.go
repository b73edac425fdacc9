package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
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
	// Kind of the workload. A CronJob is rolled through its job template: the
	// next Job it starts uses the new configuration, and Jobs already running
	// are left alone.
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet;CronJob
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

	// Selector picks the Deployments, StatefulSets, DaemonSets and CronJobs to
	// roll by their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Auto rolls every Deployment, StatefulSet, DaemonSet and CronJob in the
	// namespace whose pod template uses one of the sources, through volumes,
	// envFrom or env valueFrom, when what its pods read changes: a workload
	// that reads only single keys of a source (env valueFrom, volume items)
	// rolls only when one of those keys changes; one that reads a whole source
	// (envFrom, a volume without items) rolls on any change of it (within
	// keys, when the source lists some). A change to a source a workload does
	// not read never rolls it.
	// +optional
	Auto bool `json:"auto,omitempty"`

	// RollOnAdoption rolls each workload when the rollout starts to follow
	// it (the rollout is created, a selector or auto first picks it, it is
	// created later), so that its pods pick up the configuration as it is
	// then, under the strategy and windows. Off by default: a workload the
	// rollout starts to follow is taken to run the current configuration,
	// recorded as its baseline in status.atProvider.workloads, nothing is
	// written to it, and only a later change of the configuration rolls it.
	// +optional
	RollOnAdoption bool `json:"rollOnAdoption,omitempty"`

	// Debounce gathers the changes within this window into one rollout.
	// +optional
	Debounce *metav1.Duration `json:"debounce,omitempty"`

	// Strategy rolls the workloads a few at a time, each wave only after the
	// workloads before it are available again, and halts when one is not
	// within progressDeadline, so that a configuration that breaks pods
	// breaks only a few. Without it every workload rolls at once.
	// +optional
	Strategy *RolloutStrategy `json:"strategy,omitempty"`

	// Windows are the only times a workload starts rolling. A change outside
	// every window waits for the next one to open, as one rollout: several
	// changes while waiting roll once, to the latest content. A workload
	// rolling when a window closes finishes; the rest wait for the next
	// window. Without windows a change rolls at any time. Windows are read
	// like ChaosAgent's quiet windows.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Windows []apisv1alpha1.TimeWindow `json:"windows,omitempty"`

	// RolloutLimit bounds how often one workload rolls, so that a source
	// rewritten again and again (a flapping job, a controller fight) cannot
	// restart its workloads again and again. A workload rolled
	// rolloutLimit.rollouts times within rolloutLimit.within waits until the
	// oldest of those leaves the window, and then rolls once, to the
	// configuration current then. Without it, 5 rollouts within 10m.
	// +optional
	RolloutLimit *RolloutLimit `json:"rolloutLimit,omitempty"`
}

// A RolloutLimit is how many times one workload may roll within a sliding
// window.
type RolloutLimit struct {
	// Rollouts is how many times one workload may roll within the window.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Rollouts int32 `json:"rollouts,omitempty"`

	// Within is the sliding window, between 10s and 24h.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="within is a duration such as 90s, 10m or 1h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') || (duration(self) >= duration('10s') && duration(self) <= duration('24h'))",message="within must be between 10s and 24h"
	Within *metav1.Duration `json:"within,omitempty"`
}

// A RolloutStrategy rolls the workloads of a ConfigRollout in waves.
// Workloads roll in the order spec.forProvider.workloads lists them; picked
// by selector or auto, Deployments first, then StatefulSets, DaemonSets and
// CronJobs, each by name.
type RolloutStrategy struct {
	// MaxConcurrent is how many workloads may be rolling at once: rolled and
	// not yet available. The next workload rolls when one of them is.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxConcurrent int32 `json:"maxConcurrent,omitempty"`

	// ProgressDeadline is how long a rolled workload may take to be available
	// again: a Deployment whose controller observed the new template, with
	// every replica updated and available; a StatefulSet with every replica
	// updated (but those its partition holds back) and ready; a DaemonSet with every scheduled pod updated and
	// available (a CronJob is at once). One that is not by then halts the
	// rollout: nothing more rolls, the Progressing condition turns False with
	// reason ProgressDeadlineExceeded, and a RolloutHalted event names it.
	// The rollout resumes when that workload becomes available, when the
	// sources change again (a new rollout, from the first workload that does
	// not carry the new hash), or when progressDeadline is raised past its
	// age. Between 10s and 24h.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="progressDeadline is a duration such as 90s, 10m or 1h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') || (duration(self) >= duration('10s') && duration(self) <= duration('24h'))",message="progressDeadline must be between 10s and 24h"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`
}

// Phases of a staggered, windowed or limited rollout, in
// status.atProvider.progress.phase.
const (
	PhaseRolling          = "Rolling"
	PhaseHalted           = "Halted"
	PhaseWaitingForWindow = "WaitingForWindow"
	PhaseLimited          = "Limited"
	PhaseComplete         = "Complete"
)

// TypeProgressing is the condition of a ConfigRollout with a strategy or
// windows, or whose rolloutLimit holds a workload back: True while it rolls
// or once it has rolled everything, False while it is halted, waits for a
// window or waits for the limit.
const TypeProgressing xpv2.ConditionType = "Progressing"

// Reasons of the Progressing condition.
const (
	ReasonRolling                  xpv2.ConditionReason = "Rolling"
	ReasonRolloutComplete          xpv2.ConditionReason = "RolloutComplete"
	ReasonProgressDeadlineExceeded xpv2.ConditionReason = "ProgressDeadlineExceeded"
	ReasonOutsideWindow            xpv2.ConditionReason = "OutsideWindow"
	ReasonRolloutLimitReached      xpv2.ConditionReason = "RolloutLimitReached"
)

// ReasonDebouncing is the reason of a ConfigRollout's Ready condition while
// spec.forProvider.debounce holds back workloads to roll: the next reconcile
// is due when the window closes, however late that reconcile looks.
const ReasonDebouncing xpv2.ConditionReason = "Debouncing"

// An InFlightWorkload was rolled and is not available yet.
type InFlightWorkload struct {
	// Kind of the workload.
	Kind string `json:"kind"`
	// Name of the workload.
	Name string `json:"name"`
	// Since is when this rollout rolled it; the progress deadline counts from
	// here.
	Since metav1.Time `json:"since"`
}

// RolloutProgress is where a ConfigRollout with a strategy or windows stands.
// It is worked out again on every reconcile from the workloads themselves
// (the hash each carries, their status) and the rollout times in
// status.atProvider.workloads, so a provider restart or a new leader resumes
// it without rolling again what was rolled.
type RolloutProgress struct {
	// Phase is Rolling, Halted, WaitingForWindow or Complete.
	// +optional
	Phase string `json:"phase,omitempty"`

	// Hash the rollout rolls the workloads to.
	// +optional
	Hash string `json:"hash,omitempty"`

	// StartedAt is when the rollout to this hash began; workloads it rolled
	// have a lastRollout at or after it.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// Rolled counts the workloads that carry the hash and are available (or
	// that this rollout did not need to roll).
	// +optional
	Rolled int64 `json:"rolled,omitempty"`

	// InFlight are the workloads rolled and not available yet, at most
	// strategy.maxConcurrent.
	// +optional
	InFlight []InFlightWorkload `json:"inFlight,omitempty"`

	// Pending counts the workloads still to roll.
	// +optional
	Pending int64 `json:"pending,omitempty"`

	// Next names up to 10 pending workloads, as Kind/name, in the order they
	// roll.
	// +optional
	Next []string `json:"next,omitempty"`

	// Halted names the workload that did not become available within
	// strategy.progressDeadline, and why, while the rollout is halted.
	// +optional
	Halted string `json:"halted,omitempty"`

	// WaitingUntil is when the next rollout window opens, while pending
	// workloads wait for it.
	// +optional
	WaitingUntil *metav1.Time `json:"waitingUntil,omitempty"`

	// Limited counts the pending workloads that spec.forProvider.rolloutLimit
	// holds back: each rolled as often as the limit allows within its window.
	// +optional
	Limited int64 `json:"limited,omitempty"`

	// LimitedUntil is when the first of the workloads the limit holds back
	// may roll again.
	// +optional
	LimitedUntil *metav1.Time `json:"limitedUntil,omitempty"`
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
	// Hash of the configuration the workload's pods run with: the one its pod
	// template carries, or its baseline.
	// +optional
	Hash string `json:"hash,omitempty"`
	// Baseline is true while the workload has not been rolled since the
	// rollout started to follow it: Hash is the configuration it was taken
	// to run with then, recorded here and not on the workload.
	// +optional
	Baseline bool `json:"baseline,omitempty"`
	// LastRollout is when this ConfigRollout last rolled it.
	// +optional
	LastRollout *metav1.Time `json:"lastRollout,omitempty"`
	// RecentRollouts are the times this ConfigRollout rolled it within
	// spec.forProvider.rolloutLimit's window, oldest first, as of its last
	// rollout: at most rolloutLimit.rollouts of them.
	// +optional
	RecentRollouts []metav1.Time `json:"recentRollouts,omitempty"`
}

// ConfigRolloutObservation is the observed state of a ConfigRollout.
type ConfigRolloutObservation struct {
	// Hash of all sources together: what the pod templates of named and
	// selected workloads carry. In auto mode each workload carries the hash of
	// just what its pods read of the sources, which is this one when they read
	// every source whole.
	// +optional
	Hash string `json:"hash,omitempty"`

	// ChangedAt is when Hash last changed; a rollout waits for the debounce
	// window from here.
	// +optional
	ChangedAt *metav1.Time `json:"changedAt,omitempty"`

	// Sources and their current hashes.
	// +optional
	Sources []SourceHash `json:"sources,omitempty"`

	// Plan lists the workloads the rollout would roll, and why, while
	// spec.managementPolicies is only Observe; empty otherwise.
	// +optional
	Plan *apisv1alpha1.Plan `json:"plan,omitempty"`

	// Workloads selected, with the hash each carries.
	// +optional
	Workloads []RolledWorkload `json:"workloads,omitempty"`

	// Rollouts counts the workload rollouts this ConfigRollout triggered.
	// +optional
	Rollouts int64 `json:"rollouts,omitempty"`

	// Progress of the rollout, with spec.forProvider.strategy or windows, or
	// while spec.forProvider.rolloutLimit holds a workload back.
	// +optional
	Progress *RolloutProgress `json:"progress,omitempty"`

	// Wave is the wave of workloads the provider is rolling: recorded here,
	// at the resourceVersion it read, before it writes to any of them, and
	// cleared once it has written to all. Present only while a wave is under
	// way, or when the provider that was rolling it stopped (a restart, a
	// shard that moved to another replica): the next reconcile then rolls
	// what the wave holds that does not carry its hash yet, and no workload
	// is rolled twice for one change.
	// +optional
	Wave *RolloutWave `json:"wave,omitempty"`
}

// A RolloutWave is the workloads a ConfigRollout is about to roll, or is
// rolling, and the hashes it rolls them to.
type RolloutWave struct {
	// Hash of all sources together (status.atProvider.hash) when the wave
	// was recorded. A wave of another hash than the current one is over: a
	// later change of the configuration superseded it.
	Hash string `json:"hash"`

	// At is when the wave was recorded: when its workloads were rolled, for
	// the progress deadline of one whose own record was lost.
	At metav1.Time `json:"at"`

	// Workloads the wave rolls, in the order it rolls them.
	// +listType=atomic
	Workloads []WaveWorkload `json:"workloads"`
}

// A WaveWorkload is one workload of a wave.
type WaveWorkload struct {
	// Kind of the workload.
	Kind string `json:"kind"`
	// Name of the workload.
	Name string `json:"name"`
	// Hash the wave writes into its pod template; empty when it is the
	// wave's hash (in auto mode a workload that reads only some keys is
	// rolled to the hash of those).
	// +optional
	Hash string `json:"hash,omitempty"`
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

// A ConfigRollout rolls Deployments, StatefulSets, DaemonSets and CronJobs
// when the ConfigMaps or Secrets they use change: it writes a hash of the
// content into their pod templates (annotation
// workload.clusterops.io/config-hash; a CronJob's job template), and the
// workloads' own controllers roll the pods. A workload it starts to follow is
// not rolled: its running configuration is recorded as a baseline, and only a
// later change rolls it (unless spec.forProvider.rollOnAdoption). The hash is
// deterministic, so a provider restart rolls nothing that did not change. It
// is Ready when every selected workload runs the current configuration. It has no connection details,
// so spec.writeConnectionSecretToRef is refused.
// +kubebuilder:printcolumn:name="HASH",type="string",JSONPath=".status.atProvider.hash"
// +kubebuilder:printcolumn:name="ROLLOUTS",type="integer",JSONPath=".status.atProvider.rollouts"
// +kubebuilder:printcolumn:name="PHASE",type="string",JSONPath=".status.atProvider.progress.phase"
// +kubebuilder:printcolumn:name="PENDING",type="integer",JSONPath=".status.atProvider.progress.pending",priority=1
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="PLAN",type="string",JSONPath=".status.atProvider.plan.summary"
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
