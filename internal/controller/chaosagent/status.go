package chaosagent

import (
	"fmt"
	"strings"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// maxRecentActions bounds status.atProvider.recentActions.
const maxRecentActions = 20

// record adds an action to the agent's counters and its ring of recent actions.
// Dry-run actions are listed but not counted.
func record(o *v1alpha1.ChaosAgentObservation, a v1alpha1.ChaosAction) {
	if !a.DryRun {
		switch a.Action {
		case v1alpha1.ActionDeletePod, v1alpha1.ActionEvictPod:
			o.PodsKilled++
		case v1alpha1.ActionScaleDeployment:
			o.DeploymentsScaled++
		case v1alpha1.ActionRewriteConfigMap:
			o.ConfigMapsRewritten++
		case v1alpha1.ActionEvictionRefused:
			o.Refused++
		}
	}
	o.RecentActions = append(o.RecentActions, a)
	if n := len(o.RecentActions); n > maxRecentActions {
		o.RecentActions = append([]v1alpha1.ChaosAction(nil), o.RecentActions[n-maxRecentActions:]...)
	}
}

// describe says what an action did, for summaries and events.
func describe(a v1alpha1.ChaosAction) string {
	obj := a.Namespace + "/" + a.Name
	var s string
	switch a.Action {
	case v1alpha1.ActionDeletePod:
		s = "deleted pod " + obj
	case v1alpha1.ActionEvictPod:
		s = "evicted pod " + obj
	case v1alpha1.ActionEvictionRefused:
		s = "eviction of pod " + obj + " refused by a PodDisruptionBudget (PDB refused)"
	case v1alpha1.ActionScaleDeployment:
		s = fmt.Sprintf("scaled Deployment %s from %s to %s replicas", obj, a.Before, a.After)
	case v1alpha1.ActionRewriteConfigMap:
		s = fmt.Sprintf("rewrote ConfigMap %s with lorem ipsum (%s -> %s)", obj, a.Before, a.After)
	default:
		s = a.Action + " " + obj
	}
	if a.DryRun {
		s = "would have " + s + " (dry run)"
	}
	return s
}

// summarize says what a round did, or why it did nothing.
func summarize(done []v1alpha1.ChaosAction, reasons []string) string {
	acted := 0
	parts := make([]string, 0, len(done)+len(reasons))
	for _, a := range done {
		if a.Action != v1alpha1.ActionEvictionRefused {
			acted++
		}
		parts = append(parts, describe(a))
	}
	parts = append(parts, reasons...)
	if acted == 0 {
		if len(parts) == 0 {
			return "nothing happened"
		}
		return "nothing happened: " + strings.Join(parts, "; ")
	}
	return strings.Join(parts, "; ")
}
