// Package plan reports what a managed resource would do while its management
// policies are only Observe: each kind lists the writes it would make, and
// this package bounds and summarizes them for status and the PLAN column.
package plan

import (
	"fmt"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

// Only reports whether mg's management policies are only Observe: it plans,
// and does nothing. It decides as crossplane-runtime's policy resolver's
// ShouldOnlyObserve does (TestOnlyIsTrueForObserveAloneAsTheResolverSays compares them), without building a
// resolver and its sets on every reconcile of every resource.
func Only(mg resource.Managed) bool {
	p := mg.GetManagementPolicies()
	for _, a := range p {
		if a != xpv2.ManagementActionObserve {
			return false
		}
	}
	return len(p) > 0
}

// order is the order the summary counts actions in.
var order = []string{v1alpha1.ActionCreate, v1alpha1.ActionUpdate, v1alpha1.ActionReplace, v1alpha1.ActionDelete, v1alpha1.ActionRelease}

// Of is the plan of these actions: every one counted in the summary, the
// first MaxPlannedActions listed, each with at most MaxDriftFields fields.
func Of(actions []v1alpha1.PlannedAction) *v1alpha1.Plan {
	p := &v1alpha1.Plan{Summary: Summary(actions)}
	for i, a := range actions {
		if i == v1alpha1.MaxPlannedActions {
			p.MoreActions = int32(len(actions) - i) //nolint:gosec // Bounded by a fleet's objects.
			break
		}
		if len(a.Fields) > v1alpha1.MaxDriftFields {
			a.Fields = append(a.Fields[:v1alpha1.MaxDriftFields-1:v1alpha1.MaxDriftFields-1], fmt.Sprintf("and %d more", len(a.Fields)-v1alpha1.MaxDriftFields+1))
		}
		p.Actions = append(p.Actions, a)
	}
	return p
}

// Summary counts actions by kind: "Create 2, Update 1", or "Nothing to do".
func Summary(actions []v1alpha1.PlannedAction) string {
	n := map[string]int{}
	for _, a := range actions {
		n[a.Action]++
	}
	var parts []string
	for _, a := range order {
		if n[a] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, n[a]))
		}
	}
	if len(parts) == 0 {
		return "Nothing to do"
	}
	return strings.Join(parts, ", ")
}
