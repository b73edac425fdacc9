package configrollout

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/window"
)

// Events of staggered and windowed rollouts.
const (
	reasonHalted           event.Reason = "RolloutHalted"
	reasonResumed          event.Reason = "RolloutResumed"
	reasonWaitingForWindow event.Reason = "WaitingForWindow"
	reasonLimited          event.Reason = "RolloutLimited"
)

// recheck bounds the wait for an in-flight workload to roll out. On the
// provider's own cluster its status events reconcile the rollout at once
// (waiters); on another cluster, where workloads are not watched, this poll
// is what notices. Only rollouts with a workload in flight poll.
const recheck = 15 * time.Second

// maxNext bounds status.atProvider.progress.next, whatever the fleet.
const maxNext = 10

// A gate is what Observe decided a staggered or windowed rollout does now.
type gate struct {
	roll map[string]bool // "Kind/name" of the workloads to roll now
	wave Wave
	s    *Stagger
}

// planWave works out, after Observe has compared every selected workload's
// hash, where a staggered, windowed or limited rollout stands and what it
// rolls now, into status.atProvider.progress and the Progressing condition.
// pending holds the "Kind/name" of the workloads that do not carry their
// hash. It does nothing (and Update rolls every pending workload) without a
// strategy and windows while the rollout limit holds no pending workload back.
func (e *external) planWave(cr *v1alpha1.ConfigRollout, ws []workload, pending map[string]bool) error {
	e.gate = nil
	p := cr.Spec.ForProvider
	o := &cr.Status.AtProvider
	nn := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	now := e.now()
	held := limited(o.Workloads, pending, limitOf(p), now)
	// A rollout the limit held back plans once more when released, to say so.
	wasLimited := o.Progress != nil && o.Progress.Phase == v1alpha1.PhaseLimited
	if p.Strategy == nil && len(p.Windows) == 0 && len(held) == 0 && !wasLimited {
		o.Progress = nil
		e.waiting.set(nn, nil)
		e.metrics.forget(nn)
		return nil
	}
	windows, err := window.ParseAll("spec.forProvider.windows", p.Windows)
	if err != nil {
		return err
	}
	prev := o.Progress
	pr := &v1alpha1.RolloutProgress{Hash: o.Hash}
	if prev != nil && prev.Hash == o.Hash && prev.StartedAt != nil {
		pr.StartedAt = prev.StartedAt
	} else {
		// Seconds, as status stores them: a workload rolled in this second
		// compares as rolled by this rollout after a round trip too.
		t := metav1.NewTime(now.Truncate(time.Second))
		pr.StartedAt = &t
	}

	cs := candidates(o.Workloads, ws, pending, held, pr.StartedAt)
	if len(p.Workloads) == 0 {
		rolloutOrder(cs)
	}
	open := true
	if len(windows) > 0 {
		open, _ = window.Within(windows, now)
	}
	s := stagger(p)
	wv := NextWave(cs, s, open, now)
	if r := resumed(o.Wave, o.Hash, wv, now); open && len(r) > 0 {
		// A wave cut short finishes before another starts (wave.go), and,
		// as any wave, only while a rollout window is open.
		wv.Roll = r
	}
	e.gate = &gate{roll: map[string]bool{}, wave: wv, s: s}
	for _, c := range wv.Roll {
		e.gate.roll[c.Key()] = true
	}

	pr.Rolled, pr.Pending = int64(len(cs)-len(wv.Pending)-len(wv.InFlight)), int64(len(wv.Pending))
	for _, c := range wv.InFlight {
		pr.InFlight = append(pr.InFlight, v1alpha1.InFlightWorkload{Kind: c.Kind, Name: c.Name, Since: metav1.NewTime(*c.RolledAt)})
	}
	for _, c := range wv.Pending[:min(len(wv.Pending), maxNext)] {
		pr.Next = append(pr.Next, c.Key())
	}
	if !open && len(wv.Pending) > 0 {
		t := metav1.NewTime(window.Next(windows, now))
		pr.WaitingUntil = &t
	}
	pr.Limited = int64(len(wv.Limited))
	for _, c := range wv.Limited {
		if pr.LimitedUntil == nil || c.HeldUntil.Before(pr.LimitedUntil.Time) {
			t := metav1.NewTime(*c.HeldUntil)
			pr.LimitedUntil = &t
		}
	}
	if wv.Halted != nil {
		h := wv.Halted
		// No elapsed time in the message: it would change, and be written, on
		// every reconcile of a halted rollout.
		pr.Halted = fmt.Sprintf("%s %q is not available within progressDeadline %s of its rollout at %s", h.Kind, h.Name, s.Deadline, h.RolledAt.UTC().Format(time.RFC3339))
	}
	o.Progress = pr
	e.setProgress(cr, prev)

	e.waitFor(cr, wv.InFlight)
	return nil
}

// candidates are the followed workloads as NextWave sees them: pending or
// not, rolled out, rolled by the rollout that started at started, held back by
// the rollout limit.
func candidates(rolled []v1alpha1.RolledWorkload, ws []workload, pending map[string]bool, held map[string]time.Time, started *metav1.Time) []Candidate {
	objects := make(map[string]client.Object, len(ws))
	for _, w := range ws {
		objects[workloadKey(w.Kind, w.Name)] = w.Object
	}
	cs := make([]Candidate, 0, len(rolled))
	for _, w := range rolled {
		k := workloadKey(w.Kind, w.Name)
		c := Candidate{Kind: w.Kind, Name: w.Name, Pending: pending[k], RolledOut: true}
		if obj := objects[k]; obj != nil {
			c.RolledOut = RolledOut(obj)
		}
		if w.LastRollout != nil && !w.LastRollout.Before(started) {
			t := w.LastRollout.Time
			c.RolledAt = &t
		}
		if t, ok := held[k]; ok {
			c.HeldUntil = &t
		}
		cs = append(cs, c)
	}
	return cs
}

// limited are the pending workloads, by "Kind/name", that the rollout limit
// holds back now, with when each may roll again.
func limited(ws []v1alpha1.RolledWorkload, pending map[string]bool, l Limit, now time.Time) map[string]time.Time {
	var out map[string]time.Time
	for _, w := range ws {
		k := workloadKey(w.Kind, w.Name)
		if !pending[k] || len(w.RecentRollouts) < l.Rollouts {
			continue
		}
		if t, ok := HeldUntil(times(w.RecentRollouts), l, now); ok {
			if out == nil {
				out = map[string]time.Time{}
			}
			out[k] = t
		}
	}
	return out
}

// waitFor makes the status events of the given workloads reconcile this
// rollout: only on the provider's own cluster, whose workloads the manager
// watches.
func (e *external) waitFor(cr *v1alpha1.ConfigRollout, cs []Candidate) {
	var keys []string
	if e.cluster.Local {
		for _, c := range cs {
			keys = append(keys, c.Key())
		}
	}
	e.waiting.set(types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}, keys)
}

// rolling puts the wave Update is about to roll in the waiting table with the
// workloads already in flight, before the first patch: the patch's own event
// is not heard (ownwrite), and the status events that follow must reconcile
// the rollout as soon as the workload has rolled out, not at its next poll.
func (e *external) rolling(cr *v1alpha1.ConfigRollout) {
	if e.gate == nil || e.gate.s == nil || len(e.gate.wave.Roll) == 0 {
		return
	}
	e.waitFor(cr, append(slices.Clone(e.gate.wave.InFlight), e.gate.wave.Roll...))
}

// setProgress sets the phase, the Progressing condition and, on a change of
// phase, an event.
func (e *external) setProgress(cr *v1alpha1.ConfigRollout, prev *v1alpha1.RolloutProgress) {
	pr := cr.Status.AtProvider.Progress
	counts := fmt.Sprintf("%d rolled, %d in flight, %d pending", pr.Rolled, len(pr.InFlight), pr.Pending)
	c := xpv2.Condition{Type: v1alpha1.TypeProgressing, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(e.now())}
	switch {
	case pr.Halted != "":
		pr.Phase = v1alpha1.PhaseHalted
		c.Status, c.Reason = corev1.ConditionFalse, v1alpha1.ReasonProgressDeadlineExceeded
		c.Message = pr.Halted + ": the rollout is halted (" + counts + "); it resumes when that workload is available, the sources change again, or progressDeadline is raised"
	case pr.WaitingUntil != nil:
		pr.Phase = v1alpha1.PhaseWaitingForWindow
		c.Status, c.Reason = corev1.ConditionFalse, v1alpha1.ReasonOutsideWindow
		c.Message = fmt.Sprintf("%d workloads wait for the rollout window that opens at %s (%s)", pr.Pending, pr.WaitingUntil.UTC().Format(time.RFC3339), counts)
	case pr.Limited > 0 && pr.Limited == pr.Pending && len(pr.InFlight) == 0:
		pr.Phase = v1alpha1.PhaseLimited
		c.Status, c.Reason = corev1.ConditionFalse, v1alpha1.ReasonRolloutLimitReached
		l := limitOf(cr.Spec.ForProvider)
		c.Message = fmt.Sprintf("%d workloads rolled %d times within %s, the rolloutLimit: the first rolls again, to the configuration current then, at %s (%s)", pr.Limited, l.Rollouts, l.Within, pr.LimitedUntil.UTC().Format(time.RFC3339), counts)
	case pr.Pending > 0 || len(pr.InFlight) > 0:
		pr.Phase = v1alpha1.PhaseRolling
		c.Reason, c.Message = v1alpha1.ReasonRolling, counts
	default:
		pr.Phase = v1alpha1.PhaseComplete
		c.Reason, c.Message = v1alpha1.ReasonRolloutComplete, counts
	}
	cr.SetConditions(c)
	e.metrics.set(types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}, pr)

	was := ""
	if prev != nil {
		was = prev.Phase
	}
	switch {
	case pr.Phase == v1alpha1.PhaseHalted && (was != v1alpha1.PhaseHalted || prev.Halted != pr.Halted):
		e.record.Event(cr, event.Warning(reasonHalted, fmt.Errorf("%s", c.Message)))
	case was == v1alpha1.PhaseHalted && pr.Phase != v1alpha1.PhaseHalted:
		e.record.Event(cr, event.Normal(reasonResumed, "The rollout resumed: "+counts))
	case pr.Phase == v1alpha1.PhaseWaitingForWindow && was != v1alpha1.PhaseWaitingForWindow:
		e.record.Event(cr, event.Normal(reasonWaitingForWindow, c.Message))
	case pr.Phase == v1alpha1.PhaseLimited && was != v1alpha1.PhaseLimited:
		e.record.Event(cr, event.Warning(reasonLimited, fmt.Errorf("%s", c.Message)))
	case was == v1alpha1.PhaseLimited && pr.Phase != v1alpha1.PhaseLimited:
		e.record.Event(cr, event.Normal(reasonResumed, "The rollout resumed: "+counts))
	}
}

// heldBack reports whether a staggered or windowed rollout has pending
// workloads it rolls none of now (waiting for in-flight ones, halted, or
// outside its windows), and then says so in the Ready condition: Update is
// not called.
func (e *external) heldBack(cr *v1alpha1.ConfigRollout) bool {
	if e.gate == nil || len(e.gate.roll) > 0 {
		return false
	}
	c := cr.GetCondition(v1alpha1.TypeProgressing)
	cr.SetConditions(xpv2.Unavailable().WithMessage(c.Message))
	return true
}

// mayRoll reports whether Update rolls the workload now: every pending one
// without a strategy or windows, else the wave Observe planned.
func (e *external) mayRoll(kind, name string) bool {
	return e.gate == nil || e.gate.roll[workloadKey(kind, name)]
}

// rolledWave records, after Update rolled the planned wave, that its
// workloads are in flight, and sets Ready: Available once nothing is pending.
func (e *external) rolledWave(cr *v1alpha1.ConfigRollout) {
	pr := cr.Status.AtProvider.Progress
	if e.gate == nil || pr == nil {
		cr.SetConditions(xpv2.Available())
		return
	}
	prev := pr.DeepCopy()
	now := metav1.NewTime(e.now())
	n := int64(len(e.gate.wave.Roll))
	pr.Pending -= n
	if e.gate.s != nil {
		for _, c := range e.gate.wave.Roll {
			pr.InFlight = append(pr.InFlight, v1alpha1.InFlightWorkload{Kind: c.Kind, Name: c.Name, Since: now})
		}
	} else {
		pr.Rolled += n
	}
	pr.Next = pr.Next[min(len(pr.Next), int(n)):]
	e.setProgress(cr, prev)
	if pr.Pending > 0 {
		cr.SetConditions(xpv2.Unavailable().WithMessage(cr.GetCondition(v1alpha1.TypeProgressing).Message))
		return
	}
	cr.SetConditions(xpv2.Available())
}

// progressDue is when a staggered, windowed or limited rollout should look
// again without an event: when its window opens, when the rollout limit lets
// a held-back workload roll, or while a workload is in flight, at its
// deadline and at most recheck from now.
func progressDue(cr *v1alpha1.ConfigRollout, now time.Time) (time.Time, bool) {
	pr := cr.Status.AtProvider.Progress
	if pr == nil {
		return time.Time{}, false
	}
	due, ok := phaseDue(cr, pr, now)
	if l := pr.LimitedUntil; l != nil && (!ok || l.Before(&metav1.Time{Time: due})) {
		return l.Time, true
	}
	return due, ok
}

// phaseDue is progressDue for the phase alone.
func phaseDue(cr *v1alpha1.ConfigRollout, pr *v1alpha1.RolloutProgress, now time.Time) (time.Time, bool) {
	switch pr.Phase {
	case v1alpha1.PhaseWaitingForWindow:
		if pr.WaitingUntil != nil {
			return pr.WaitingUntil.Time, true
		}
	case v1alpha1.PhaseRolling:
		if len(pr.InFlight) == 0 {
			return time.Time{}, false
		}
		due := now.Add(recheck)
		if s := stagger(cr.Spec.ForProvider); s != nil {
			for _, w := range pr.InFlight {
				if d := w.Since.Add(s.Deadline); d.After(now) && d.Before(due) {
					due = d
				}
			}
		}
		return due, true
	}
	return time.Time{}, false
}

// untilDue brings the next reconcile forward to the end of a debounce window,
// the opening of a rollout window, or the next look at in-flight workloads,
// whichever comes first.
func untilDue(now func() time.Time) managed.PollIntervalHook {
	return managedkind.PollUntil(now, func(cr *v1alpha1.ConfigRollout, now time.Time) (time.Time, bool) {
		d1, ok1 := heldByDebounce(cr, now)
		d2, ok2 := progressDue(cr, now)
		switch {
		case ok1 && ok2:
			if d2.Before(d1) {
				return d2, true
			}
			return d1, true
		case ok2:
			return d2, true
		default:
			return d1, ok1
		}
	})
}

// waiters knows which rollouts wait for which in-flight workloads, so that
// those workloads' status events, which the metadata watch sees (their
// resourceVersion changes) but the other workload handlers drop, reconcile
// the rollout that waits and nothing else. It is a hint for speed, not state:
// every reconcile sets it again from status and the workloads, and the poll
// (progressDue) covers what it misses, such as after a restart until the
// first reconcile.
type waiters struct {
	mu         sync.Mutex
	by         map[types.NamespacedName]map[string]bool // workload "Kind/name" in its namespace → rollouts
	forRollout map[types.NamespacedName][]string        // rollout → workloads it waits for
}

func newWaiters() *waiters {
	return &waiters{by: map[types.NamespacedName]map[string]bool{}, forRollout: map[types.NamespacedName][]string{}}
}

// set replaces the workloads rollout waits for.
func (w *waiters) set(rollout types.NamespacedName, workloads []string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range w.forRollout[rollout] {
		wk := types.NamespacedName{Namespace: rollout.Namespace, Name: k}
		delete(w.by[wk], rollout.Name)
		if len(w.by[wk]) == 0 {
			delete(w.by, wk)
		}
	}
	delete(w.forRollout, rollout)
	if len(workloads) == 0 {
		return
	}
	w.forRollout[rollout] = workloads
	for _, k := range workloads {
		wk := types.NamespacedName{Namespace: rollout.Namespace, Name: k}
		if w.by[wk] == nil {
			w.by[wk] = map[string]bool{}
		}
		w.by[wk][rollout.Name] = true
	}
}

// rollouts returns the rollouts waiting for a workload.
func (w *waiters) rollouts(kind string, o client.Object) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.by[types.NamespacedName{Namespace: o.GetNamespace(), Name: workloadKey(kind, o.GetName())}]
	out := make([]string, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	return out
}

// debounce gathers the status events of a workload in flight, which come in
// bursts (observed generation, updated, ready, available replicas, one pod at
// a time), into one reconcile of the rollout that waits: each reconcile reads
// every workload of the rollout.
const debounce = time.Second

// watch passes only updates of workloads a rollout waits for: a map lookup
// per event, on the metadata watch the manager already has. A rollout that
// no longer exists (one deleted under the Orphan policy is not observed on
// its way out) is dropped from the table instead; c reads the manager's
// cache.
func (w *waiters) watch(kind string, c client.Reader) (handler.EventHandler, builder.Predicates) {
	h := handler.Funcs{
		UpdateFunc: func(ctx context.Context, e ctrlevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			for _, r := range w.rollouts(kind, e.ObjectNew) {
				nn := types.NamespacedName{Namespace: e.ObjectNew.GetNamespace(), Name: r}
				if err := c.Get(ctx, nn, &v1alpha1.ConfigRollout{}); kerrors.IsNotFound(err) {
					w.set(nn, nil)
					continue
				}
				q.AddAfter(reconcile.Request{NamespacedName: nn}, debounce)
			}
		},
	}
	p := builder.WithPredicates(predicate.Funcs{
		UpdateFunc:  func(e ctrlevent.UpdateEvent) bool { return len(w.rollouts(kind, e.ObjectNew)) > 0 },
		CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return false },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
	})
	return h, p
}

// watchAll adds the waiters' watch of every workload kind: on the same
// metadata informers as the other workload watches, so it costs no watch.
func (w *waiters) watchAll(b *builder.Builder, c client.Reader) *builder.Builder {
	for _, kind := range Kinds {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(GroupVersionKind(kind))
		h, p := w.watch(kind, c)
		b = b.Watches(m, h, builder.OnlyMetadata, p)
	}
	return b
}
