package copyrule

import (
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/plan"
)

// What a rule reports: its copies' counts and problems, its plan while it
// only plans, how long its copies have been out of sync, and the drift it repaired.

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
		cr.Status.AtProvider.Plan = plan.Of(planned(e.dst.Kind, e.plan.Actions))
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

// fresh records how long the rule's copies have been out of sync, from its problems, and
// returns them with their Since: the Fresh condition, outOfSyncSince, the
// provider's oldest, and a Warning event when the copies went stale.
func (e *external) fresh(cr *v1alpha1.CopyRule, problems []v1alpha1.CopyProblem) []v1alpha1.CopyProblem {
	f := Fresh(e.before, problems, e.now(), staleAfter(cr))
	cr.Status.AtProvider.OutOfSyncSince = f.Since
	cr.SetConditions(f.Condition)
	e.outOfSync.set(types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}, f.Since, staleAfter(cr))
	if f.Condition.Reason == v1alpha1.ReasonStale && e.beforeFresh.Reason != v1alpha1.ReasonStale && !e.warnedStale {
		e.warnedStale = true
		e.record.Event(cr, event.Warning(reasonStale, errors.New(f.Condition.Message)))
	}
	return f.Problems
}

// repaired reports the copies whose drift a write repaired: each of the
// first few by an event and in status, the rest together.
func (e *external) repaired(cr *v1alpha1.CopyRule, done []Action) {
	kind := e.dst.Kind
	for i, a := range done {
		if i == repairsReported {
			e.drift.RepairedMore(e.record, cr, v1alpha1.CopyRuleKind, len(done)-i)
			return
		}
		e.drift.Repaired(e.record, cr, v1alpha1.CopyRuleKind, &cr.Status.AtProvider.RecentDrift, drift.Of(kind, a.Object.Namespace, a.Object.Name, a.Drift), e.now())
	}
}

// repairsReported bounds the DriftRepaired events of one reconcile: a copy
// edited in every namespace is a handful of events and a count, not one
// event per copy.
const repairsReported = 10

// report writes the counts, problems and Ready condition into the status.
func (e *external) report(cr *v1alpha1.CopyRule, problems []v1alpha1.CopyProblem, inSync, failed int, wrote bool) {
	o := &cr.Status.AtProvider
	wasInSync := o.LastFullSync != nil && o.CopiesInSync == o.IntendedCopies
	o.IntendedCopies = count32(e.plan.Intended)
	o.CopiesInSync = count32(inSync)
	o.Copies = fmt.Sprintf("%d/%d", inSync, e.plan.Intended)
	o.Failed = count32(failed)
	o.Skipped = count32(e.plan.Skipped)
	sort.SliceStable(problems, func(i, j int) bool {
		a, b := problems[i], problems[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	problems = e.fresh(cr, problems)
	o.Problems, o.MoreProblems = problems, 0
	if len(problems) > v1alpha1.MaxProblems {
		o.Problems, o.MoreProblems = problems[:v1alpha1.MaxProblems], count32(len(problems)-v1alpha1.MaxProblems)
	}
	if len(o.Problems) == 0 {
		o.Problems = nil
	}
	if inSync == e.plan.Intended {
		// Set when the rule comes into sync, not on every reconcile: a
		// converged rule's status is left as it is, so nothing is written.
		if !wasInSync || wrote {
			now := metav1.NewTime(e.now())
			o.LastFullSync = &now
		}
		cr.SetConditions(xpv2.Available())
		return
	}
	msg := fmt.Sprintf("%d of %d copies in sync", inSync, e.plan.Intended)
	if len(problems) > 0 {
		msg += fmt.Sprintf("; %d problems, first: %s/%s: %s", len(problems), problems[0].Namespace, problems[0].Name, problems[0].Message)
	}
	cr.SetConditions(xpv2.Unavailable().WithMessage(msg))
}
