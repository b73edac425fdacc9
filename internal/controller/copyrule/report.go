package copyrule

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/plan"
)

// What a rule reports beyond its copies' counts: its plan while it only
// plans, how far behind its copies are, and the drift it repaired.

// begin remembers the rule's problems and freshness as the reconcile found
// them, for each report of it to carry on from (Fresh).
func (e *external) begin(cr *v1alpha1.CopyRule) {
	e.before = v1alpha1.CopyRuleObservation{Problems: slices.Clone(cr.Status.AtProvider.Problems), OutOfSyncSince: cr.Status.AtProvider.OutOfSyncSince}
	e.beforeFresh = cr.GetCondition(v1alpha1.TypeFresh)
}

// planned shows the plan in status while the rule only plans, and none
// otherwise.
func (e *external) planned(cr *v1alpha1.CopyRule, planning bool) {
	cr.Status.AtProvider.Plan = nil
	if planning {
		cr.Status.AtProvider.Plan = plan.Of(planned(CopyKind(cr.Spec.ForProvider), e.plan.Actions))
	}
}

// planned is what a plan's actions would do, as status shows it.
func planned(kind string, actions []Action) []apisv1alpha1.PlannedAction {
	out := make([]apisv1alpha1.PlannedAction, 0, len(actions))
	for _, a := range actions {
		pa := apisv1alpha1.PlannedAction{Kind: kind, Namespace: a.Object.Namespace, Name: a.Object.Name, Fields: a.Fields}
		switch a.Op {
		case OpCreate:
			pa.Action = apisv1alpha1.ActionCreate
		case OpUpdate, OpReplace:
			pa.Action = apisv1alpha1.ActionUpdate
			if a.Op == OpReplace {
				pa.Action, pa.Reason = apisv1alpha1.ActionReplace, "immutable, or of another type: deleted and created again"
			}
			if len(a.Fields) == 0 && TakenOver(a.Object) {
				pa.Reason = "an object the rule did not create, taken over as conflictPolicy says"
			}
		case OpPrune:
			pa.Action, pa.Reason = apisv1alpha1.ActionDelete, "a copy no longer wanted"
		case OpRelease:
			pa.Action, pa.Reason = apisv1alpha1.ActionRelease, "taken over and no longer wanted: the rule's marks removed, the object kept"
		}
		out = append(out, pa)
	}
	return out
}

// fresh records how far behind the rule's copies are, from its problems, and
// returns them with their Since: the Fresh condition, outOfSyncSince, the
// provider's oldest, and a Warning event when the copies went stale.
func (e *external) fresh(cr *v1alpha1.CopyRule, problems []v1alpha1.CopyProblem) []v1alpha1.CopyProblem {
	f := Fresh(e.before, problems, e.now(), staleAfter(cr))
	cr.Status.AtProvider.OutOfSyncSince = f.Since
	cr.SetConditions(f.Condition)
	e.behind.set(types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}, f.Since)
	if f.Condition.Reason == v1alpha1.ReasonStale && e.beforeFresh.Reason != v1alpha1.ReasonStale && !e.warnedStale {
		e.warnedStale = true
		e.record.Event(cr, event.Warning(reasonStale, errors.New(f.Condition.Message)))
	}
	return f.Problems
}

// repaired reports the copies whose drift a write repaired: each of the
// first few by an event and in status, the rest together.
func (e *external) repaired(cr *v1alpha1.CopyRule, done []Action) {
	kind := CopyKind(cr.Spec.ForProvider)
	for i, a := range done {
		if i == repairsReported {
			drift.RepairedMore(e.record, cr, v1alpha1.CopyRuleKind, len(done)-i)
			return
		}
		drift.Repaired(e.record, cr, v1alpha1.CopyRuleKind, &cr.Status.AtProvider.RecentDrift, drift.Of(kind, a.Object.Namespace, a.Object.Name, a.Drift), e.now())
	}
}

// repairsReported bounds the DriftRepaired events of one reconcile: a copy
// edited in every namespace is a handful of events and a count, not one
// event per copy.
const repairsReported = 10
