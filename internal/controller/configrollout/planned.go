package configrollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/plan"
)

// planned is what rolling the pending workloads ("Kind/name") in namespace
// ns would do, and why: the sources that changed since the last observation
// (before), with the keys that count for each. A workload still pending
// with no source changed since keeps the reason the last plan (prev) gave.
func planned(p workloadv1alpha1.ConfigRolloutParameters, ns string, prev *v1alpha1.Plan, before, now []workloadv1alpha1.SourceHash, pending map[string]bool) *v1alpha1.Plan {
	why, changed := RollReason(p, before, now)
	gave := map[string]string{}
	if prev != nil {
		for _, a := range prev.Actions {
			gave[a.Kind+"/"+a.Name] = a.Reason
		}
	}
	out := make([]v1alpha1.PlannedAction, 0, len(pending))
	for _, key := range slices.Sorted(maps.Keys(pending)) {
		kind, name, _ := strings.Cut(key, "/")
		reason := "rolls its pods: " + why
		if r := gave[key]; r != "" && !changed {
			reason = r
		}
		out = append(out, v1alpha1.PlannedAction{
			Action: v1alpha1.ActionUpdate, Kind: kind, Namespace: ns, Name: name,
			Fields: []string{"spec.template.metadata.annotations[" + AnnotationHash + "]"},
			Reason: reason,
		})
	}
	return plan.Of(out)
}

// RollReason says why workloads would roll: the sources whose content
// changed between two observations (with the keys that count, where the
// rollout names some), or, when none did, that they do not carry the
// configuration's hash. changed is false in that case.
func RollReason(p workloadv1alpha1.ConfigRolloutParameters, before, now []workloadv1alpha1.SourceHash) (why string, changed bool) {
	was := make(map[string]string, len(before))
	for _, s := range before {
		was[s.Kind+"/"+s.Name] = s.Hash
	}
	keys := map[string][]string{}
	for _, r := range p.ConfigMaps {
		keys[KindConfigMap+"/"+r.Name] = r.Keys
	}
	for _, r := range p.Secrets {
		keys[KindSecret+"/"+r.Name] = r.Keys
	}
	var diff []string
	for _, s := range now {
		id := s.Kind + "/" + s.Name
		if h, ok := was[id]; ok && h == s.Hash {
			continue
		}
		c := fmt.Sprintf("%s %s changed", s.Kind, s.Name)
		if k := keys[id]; len(k) > 0 {
			c += fmt.Sprintf(" (keys %s)", strings.Join(k, ", "))
		}
		diff = append(diff, c)
	}
	if len(diff) == 0 || len(before) == 0 {
		return "it does not carry the hash of the configuration as it is now", false
	}
	return strings.Join(diff, "; "), true
}
