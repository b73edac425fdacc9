package chaosagent

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

const reasonCutShort event.Reason = "RoundCutShort"

// A round acts at most once, whichever replica holds the agent and however
// often it restarts. Before its first action, a round that acts records
// itself in status.atProvider.roundUnderWay with one status update at the
// resourceVersion the reconcile read (begin): a replica that read the agent
// before another replica's round, or before its own last one, meets a
// conflict there and acts on nothing. The round's record at the end of the
// reconcile (the managed reconciler's status update) clears it. A replica
// that finds it still set reads it as a round whose holder stopped before
// recording it, SIGKILLed, restarted or handed the agent over, and closes it
// as cut short without acting (cutShort): the actions it took stand, those it
// did not take are not taken, and its next round is due an interval after it
// began. Redoing the actions not yet taken would need each one recorded as it
// is taken, a status write per action; closing the round needs none.
// TestCutShort, TestRoundUnderWayIsNotRepeated, TestBeginBeforeActing,
// TestChaosAgentRoundCutShortIsNotRepeated
// (test/integration/chaosagent_handover_test.go) and
// TestChaosRoundCutByKillIsNotRepeated
// (test/reliability/process/chaosround_test.go) hold this.

// cutShort closes the round o records as under way, if any, as cut short: it
// counts as run, at the time it began, and is never started again. It
// reports whether there was one.
func cutShort(o *v1alpha1.ChaosAgentObservation) bool {
	r := o.RoundUnderWay
	if r == nil {
		return false
	}
	o.RoundUnderWay = nil
	if r.Number <= o.RoundsRun {
		// Recorded already: only the marker outlived the round's record.
		return false
	}
	started := r.StartedAt
	o.RoundsRun, o.LastRoundTime = r.Number, &started
	o.LastRoundSummary = fmt.Sprintf("round %d was cut short: the provider stopped or handed the agent over after it began, "+
		"before it was recorded; of its %d planned action(s), those taken stand and the rest are not taken", r.Number, r.Planned)
	return true
}

// dueAt is when the agent's next round is: an interval after the last round
// began, at once for an agent that never ran one.
func dueAt(o v1alpha1.ChaosAgentObservation, interval time.Duration, now time.Time) time.Time {
	if o.LastRoundTime == nil {
		return now
	}
	return o.LastRoundTime.Add(interval)
}

// begin records in the agent's status, at the resourceVersion the reconcile
// read, that round number began at now with planned actions, and that the
// next round is due an interval later. Nothing may be acted on unless it
// returns nil.
func (e *external) begin(ctx context.Context, ca *v1alpha1.ChaosAgent, number int64, now time.Time, interval time.Duration, planned int) error {
	// Written to the target cluster or not, the record is a write for the
	// agent's shard: past the fence, nothing of the round starts.
	if err := shard.CheckWrite(ctx); err != nil {
		return errors.Wrapf(err, "cannot record round %d as under way: not acting", number)
	}
	o := &ca.Status.AtProvider
	next, started := metav1.NewTime(now.Add(interval)), metav1.NewTime(now)
	last := o.LastRoundTime
	o.RoundUnderWay = &v1alpha1.ChaosRound{Number: number, StartedAt: started, Planned: int32(min(planned, 1<<30))} //nolint:gosec // Bounded.
	o.NextRoundTime = &next
	// The round's start is its time whatever becomes of it (finish and
	// cutShort record the same): a replica of an older version, which knows
	// no roundUnderWay, then finds the round run, not due.
	o.LastRoundTime = &started
	if err := e.status.Update(ctx, ca); err != nil {
		o.RoundUnderWay, o.LastRoundTime = nil, last
		return errors.Wrapf(err, "cannot record round %d as under way: not acting", number)
	}
	return nil
}

// closeCutShort closes a round cut short (cutShort), and tells of it.
func (e *external) closeCutShort(ca *v1alpha1.ChaosAgent) {
	if cutShort(&ca.Status.AtProvider) {
		e.record.Event(ca, event.Warning(reasonCutShort, errors.New(upperFirst(ca.Status.AtProvider.LastRoundSummary))))
	}
}
