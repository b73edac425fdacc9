package plan

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/fake"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

func TestOfCountsEveryActionAndListsTheFirst(t *testing.T) {
	act := func(action string, n int) []v1alpha1.PlannedAction {
		out := make([]v1alpha1.PlannedAction, n)
		for i := range out {
			out[i] = v1alpha1.PlannedAction{Action: action, Kind: "ConfigMap", Namespace: "n", Name: fmt.Sprint(i)}
		}
		return out
	}
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("data.k%d", i)
	}
	cases := map[string]struct {
		reason  string
		actions []v1alpha1.PlannedAction
		summary string
		listed  int
		more    int32
	}{
		"Nothing": {reason: "No action is nothing to do.", summary: "Nothing to do"},
		"Counted": {reason: "Actions are counted by kind, in a fixed order.", actions: append(act(v1alpha1.ActionDelete, 1), act(v1alpha1.ActionCreate, 2)...), summary: "Create 2, Delete 1", listed: 3},
		"Bounded": {reason: "Twenty are listed, the rest counted.", actions: act(v1alpha1.ActionUpdate, 25), summary: "Update 25", listed: 20, more: 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Of(tc.actions)
			if diff := cmp.Diff([]any{tc.summary, tc.listed, tc.more}, []any{p.Summary, len(p.Actions), p.MoreActions}); diff != "" {
				t.Errorf("%s\nOf(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	p := Of([]v1alpha1.PlannedAction{{Action: v1alpha1.ActionUpdate, Fields: many}})
	if got := p.Actions[0].Fields; len(got) != v1alpha1.MaxDriftFields || got[len(got)-1] != "and 3 more" {
		t.Errorf("fields of an action are bounded with a count: %q", got)
	}
	if len(many) != 12 || many[9] != "data.k9" {
		t.Errorf("Of changed the fields it was given: %q", many)
	}
}

func TestOnlyIsTrueForObserveAloneAsTheResolverSays(t *testing.T) {
	cases := map[string]struct {
		policies xpv2.ManagementPolicies
		want     bool
	}{
		"Default":      {want: false},
		"All":          {policies: xpv2.ManagementPolicies{xpv2.ManagementActionAll}, want: false},
		"ObserveOnly":  {policies: xpv2.ManagementPolicies{xpv2.ManagementActionObserve}, want: true},
		"NoDelete":     {policies: xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate}, want: false},
		"Empty":        {policies: xpv2.ManagementPolicies{}, want: false},
		"ObserveTwice": {policies: xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionObserve}, want: true},
		"LateInit":     {policies: xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionLateInitialize}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := &fake.Managed{}
			mg.SetManagementPolicies(tc.policies)
			if got := Only(mg); got != tc.want {
				t.Errorf("Only(%v) = %t, want %t", tc.policies, got, tc.want)
			}
			// Only decides as crossplane-runtime's resolver does.
			p := tc.policies
			if want := managed.NewManagementPoliciesResolver(len(p) > 0, p).ShouldOnlyObserve(); Only(mg) != want {
				t.Errorf("Only(%v) = %t, the resolver says %t", p, Only(mg), want)
			}
		})
	}
}
