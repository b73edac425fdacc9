package chaosagent

import (
	"fmt"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/plan"
)

// planned is a dry round's actions in the shape every kind reports its plan
// in; nil for a round that acts.
func planned(dry bool, actions []Action) *apisv1alpha1.Plan {
	if !dry {
		return nil
	}
	out := make([]apisv1alpha1.PlannedAction, 0, len(actions))
	for _, a := range actions {
		p := apisv1alpha1.PlannedAction{Namespace: a.Namespace, Name: a.Name}
		switch a.Kind {
		case v1alpha1.ActionDeletePod:
			p.Action, p.Kind, p.Reason = apisv1alpha1.ActionDelete, "Pod", "tantrumMode: deleted"
		case v1alpha1.ActionEvictPod:
			p.Action, p.Kind, p.Reason = apisv1alpha1.ActionDelete, "Pod", "tantrumMode: evicted, as its PodDisruptionBudget allows"
		case v1alpha1.ActionScaleDeployment:
			p.Action, p.Kind, p.Fields = apisv1alpha1.ActionUpdate, "Deployment", []string{"spec.replicas"}
			p.Reason = fmt.Sprintf("cancerMode: %d to %d replicas", a.FromReplicas, a.ToReplicas)
		case v1alpha1.ActionRewriteConfigMap:
			p.Action, p.Kind, p.Fields, p.Reason = apisv1alpha1.ActionUpdate, "ConfigMap", []string{"data"}, "ipsumMode: its data overwritten with lorem ipsum"
		default:
			continue
		}
		out = append(out, p)
	}
	return plan.Of(out)
}
