package main

import (
	"fmt"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Config holds the bounds the alerts are generated with.
type Config struct {
	// ErrorWindow is how long every request to a cluster must have failed
	// before its API server counts as unreachable.
	ErrorWindow time.Duration
	// For, when set, replaces every alert's own for: (the e2e tier's short
	// bounds).
	For time.Duration
}

// defaultConfig is what examples/monitoring ships.
func defaultConfig() Config {
	return Config{ErrorWindow: 2 * time.Minute}
}

// e2eConfig is what the e2e tier runs the same rules with, so that an alert
// fires within seconds of its condition rather than minutes.
func e2eConfig() Config {
	return Config{ErrorWindow: 20 * time.Second, For: 5 * time.Second}
}

// runbookBase is where each alert's runbook section lives.
const runbookBase = "https://github.com/clusterops/provider-clusterops/blob/main/docs/operations.md#"

// An alert is one alerting rule and what an operator reads when it fires.
type alert struct {
	name     string
	expr     string
	forDur   time.Duration
	severity string
	summary  string
	// description is a Prometheus template: $labels and $value.
	description string
}

// promDuration renders d as a PromQL duration.
func promDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	default:
		return fmt.Sprintf("%ds", d/time.Second)
	}
}

// alerts are every alert of the provider, in the order the runbook lists them.
func alerts(c Config) []alert {
	win := promDuration(c.ErrorWindow)
	return []alert{
		{
			name: "ClusteropsCopiesStale",
			// Each rule's series says when its copies behind turn stale, by
			// its own staleAfter; a rule has one only while copies are behind.
			expr:   "time() - clusterops_copyrule_stale_at_timestamp_seconds > 0",
			forDur: time.Minute, severity: "warning",
			summary: "Copies of a CopyRule are stale: out of sync with their source beyond its staleAfter.",
			description: "CopyRule {{ $labels.namespace }}/{{ $labels.name }} has copies out of sync with their source for " +
				"{{ $value | humanizeDuration }} beyond its staleAfter. It is Fresh=False (reason Stale) and names each copy and why " +
				"in status.atProvider.problems: kubectl get copyrule -n {{ $labels.namespace }} {{ $labels.name }} -o yaml.",
		},
		{
			name:   "ClusteropsRolloutNotReady",
			expr:   `sum by (gvk) (crossplane_managed_resource_exists{gvk=~".*Kind=ConfigRollout"} - crossplane_managed_resource_ready{gvk=~".*Kind=ConfigRollout"}) > 0`,
			forDur: 15 * time.Minute, severity: "warning",
			summary: "A ConfigRollout is halted or stuck: not Ready for 15 minutes.",
			description: "{{ $value }} ConfigRollout(s) have not been Ready for 15 minutes: a workload still in flight past " +
				"progressDeadline halts a rollout (Progressing=False, reason ProgressDeadlineExceeded), and a missing source or a " +
				"rollout limit holds one back. kubectl get configrollouts -A -o wide names them (column PHASE).",
		},
		{
			// A staggered rollout has a phase series while unfinished; Halted
			// is already past its progressDeadline.
			name:   "ClusteropsRolloutHalted",
			expr:   `max by (namespace, name) (clusterops_configrollout_phase{phase="Halted"}) == 1`,
			forDur: time.Minute, severity: "warning",
			summary: "A ConfigRollout is halted: a workload it rolled is not available within progressDeadline.",
			description: "ConfigRollout {{ $labels.namespace }}/{{ $labels.name }} is halted: status.atProvider.progress.halted " +
				"names the workload still in flight past progressDeadline (Progressing=False, reason ProgressDeadlineExceeded). " +
				"It resumes when that workload is available, the sources change again, or progressDeadline is raised: " +
				"kubectl get configrollout -n {{ $labels.namespace }} {{ $labels.name }} -o yaml.",
		},
		{
			name:   "ClusteropsChaosPausedBySteadyState",
			expr:   `max by (agent) (clusterops_chaos_acting{reason="SteadyStateViolated"} == 0)`,
			forDur: 30 * time.Minute, severity: "warning",
			summary: "A ChaosAgent is paused by its steady-state guard.",
			description: "ChaosAgent {{ $labels.agent }} has been paused for 30 minutes because its targets are below their " +
				"steady state (Acting=False, reason SteadyStateViolated): the workloads it disturbs are not healthy on their own.",
		},
		{
			name:   "ClusteropsChaosUnrecovered",
			expr:   `sum by (agent, namespace, kind, workload) (increase(clusterops_chaos_unrecovered_total[1h])) > 0`,
			forDur: 0, severity: "warning",
			summary: "A workload did not recover from a ChaosAgent's action: its verdict is Unrecovered.",
			description: "{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.workload }} did not recover within the " +
				"recoveryTimeout of ChaosAgent {{ $labels.agent }} after one of its actions in the last hour: " +
				"the agent's verdict on it is Unrecovered (status.atProvider.verdicts).",
		},
		{
			name: "ClusteropsRemoteClusterUnreachable",
			expr: `sum by (instance, host) (rate(rest_client_requests_total{code="<error>"}[` + win + `])) > 0` +
				` unless on (instance, host) sum by (instance, host) (rate(rest_client_requests_total{code!="<error>"}[` + win + `])) > 0`,
			forDur: 2 * time.Minute, severity: "critical",
			summary: "A cluster's API server does not answer the provider.",
			description: "Every request of provider {{ $labels.instance }} to the API server at {{ $labels.host }} has failed for " +
				win + " and more. The managed resources whose ProviderConfig points there are Synced=False with " +
				"\"cluster ... has been unreachable since ...\" and retry; nothing they made is deleted.",
		},
		{
			name: "ClusteropsShardUnheld",
			expr: `max by (shard) (max_over_time(clusterops_shard_held[1h]))` +
				` unless on (shard) max by (shard) (clusterops_shard_held == 1)`,
			forDur: 5 * time.Minute, severity: "critical",
			summary: "A shard of the fleet is held by no replica: nobody acts on its managed resources.",
			description: "No replica of the provider has held the Lease of shard {{ $labels.shard }} for 5 minutes, so the " +
				"managed resources labelled crossplane.io/shard={{ $labels.shard }} are not reconciled.",
		},
		{
			name:   "ClusteropsReconcileErrors",
			expr:   `sum by (controller) (rate(controller_runtime_reconcile_errors_total[5m])) > 0`,
			forDur: 15 * time.Minute, severity: "warning",
			summary: "A controller of the provider keeps failing its reconciles.",
			description: "Controller {{ $labels.controller }} has returned reconcile errors for 15 minutes: the provider's " +
				"log names each.",
		},
		{
			name:   "ClusteropsResourcesNotSynced",
			expr:   `sum by (gvk) (crossplane_managed_resource_exists - crossplane_managed_resource_synced) > 0`,
			forDur: 15 * time.Minute, severity: "warning",
			summary: "Managed resources have not been Synced for 15 minutes.",
			description: "{{ $value }} managed resource(s) of {{ $labels.gvk }} have not been Synced for 15 minutes: their " +
				"Synced=False condition says why (a missing source, reach denied, an object in the way, an unreachable " +
				"cluster), and a Warning event names each.",
		},
		{
			name:   "ClusteropsWorkQueueBacklog",
			expr:   `sum by (controller) (workqueue_depth) > 1000`,
			forDur: 15 * time.Minute, severity: "warning",
			summary: "A controller's work queue has held more than 1,000 requests for 15 minutes.",
			description: "The work queue of controller {{ $labels.controller }} holds {{ $value }} requests: the provider " +
				"reconciles more slowly than work arrives.",
		},
		{
			name:   "ClusteropsChangesWait",
			expr:   `histogram_quantile(0.9, sum by (controller, le) (rate(clusterops_urgent_wait_seconds_bucket[5m]))) >= 10`,
			forDur: 15 * time.Minute, severity: "warning",
			summary: "Changes wait 10 seconds or more for a worker.",
			description: "For controller {{ $labels.controller }}, one change in ten has waited 10 seconds or more in the " +
				"queue for a worker for 15 minutes: the controller's workers are all busy with routine work or retries.",
		},
		{
			name:   "ClusteropsRoutineRequestsHeld",
			expr:   `sum by (instance) (clusterops_api_routine_requests_waiting) > 0`,
			forDur: 30 * time.Minute, severity: "info",
			summary: "Routine requests have waited at the request bound for 30 minutes.",
			description: "Provider {{ $labels.instance }} has held {{ $value }} routine requests (new resources, polls, resyncs) " +
				"at --max-routine-requests for 30 minutes.",
		},
	}
}

// anchor is the heading anchor of an alert's runbook section, as GitHub
// makes it from the heading.
func anchor(name string) string { return strings.ToLower(name) }

// ruleGroups are the provider's alerting rules.
func ruleGroups(c Config) []monitoringv1.RuleGroup {
	g := monitoringv1.RuleGroup{Name: "provider-clusterops"}
	for _, a := range alerts(c) {
		d := a.forDur
		if c.For > 0 {
			d = c.For
		}
		r := monitoringv1.Rule{
			Alert:  a.name,
			Expr:   intstr.FromString(a.expr),
			Labels: map[string]string{"severity": a.severity},
			Annotations: map[string]string{
				"summary":     a.summary,
				"description": a.description,
				"runbook_url": runbookBase + anchor(a.name),
			},
		}
		if d > 0 {
			f := monitoringv1.Duration(promDuration(d))
			r.For = &f
		}
		g.Rules = append(g.Rules, r)
	}
	return []monitoringv1.RuleGroup{g}
}
