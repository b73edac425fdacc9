// Package chaosagent runs controlled chaos: on an interval it kills random
// pods, scales random Deployments up and overwrites random ConfigMaps, only
// where it may, within the limits it is given, and reverts what it changed
// when it is deleted.
package chaosagent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/target"
)

const (
	reasonNothingHappened event.Reason = "NothingHappened"
)

// Setup adds the ChaosAgent controller to mgr. Agents watch nothing: each is
// re-polled when its next round is due, or sooner while it waits for a
// workload it disturbed to recover. Kill switches are read from the manager's
// cache: configs through the informer the resolver already uses, namespaces
// through one metadata-only informer shared by every agent.
func Setup(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver) error {
	rounds := newLastRounds()
	m, err := newMetrics(o.Metrics)
	if err != nil {
		return err
	}
	return managedkind.Setup(mgr, o, r, managedkind.Kind[*v1alpha1.ChaosAgent]{
		GroupVersionKind: resource.ManagedKind(v1alpha1.ChaosAgentGroupVersionKind),
		Object:           &v1alpha1.ChaosAgent{},
		List:             &v1alpha1.ChaosAgentList{},
		NewClient: func(c *target.Cluster, rec event.Recorder, status client.SubResourceWriter, _ *v1alpha1.ChaosAgent) managed.TypedExternalClient[*v1alpha1.ChaosAgent] {
			return &external{cluster: c, kube: mgr.GetClient(), status: status, record: rec, now: time.Now, lastRounds: rounds, metrics: m, evict: func(ctx context.Context, p *corev1.Pod) error { return evict(ctx, c.Config, p) }}
		},
		PollHook: untilNextRound(time.Now),
		Forget: func(agent types.NamespacedName) {
			m.forget(&v1alpha1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Namespace: agent.Namespace, Name: agent.Name}})
		},
	})
}

// untilNextRound brings the next reconcile forward to the agent's next round,
// so agents run at their own interval, not at the provider's poll interval;
// while a recovery is waited for, to the next probe if that is sooner.
func untilNextRound(now func() time.Time) managed.PollIntervalHook {
	return managedkind.PollUntil(now, func(ca *v1alpha1.ChaosAgent, now time.Time) (time.Time, bool) {
		o := ca.Status.AtProvider
		if pending(o.Verdicts) {
			interval := ca.Spec.ForProvider.Interval.Duration
			if interval <= 0 {
				interval = defaultInterval
			}
			probe := now.Add(ProbeEvery(interval))
			if o.NextRoundTime == nil || probe.Before(o.NextRoundTime.Time) {
				return probe, true
			}
		}
		if t := o.NextRoundTime; t != nil {
			return t.Time, true
		}
		return time.Time{}, false
	})
}

type external struct {
	cluster *target.Cluster
	// kube reads the control plane from the manager's cache: the agent's
	// config and, when the target is the provider's own cluster, namespaces.
	kube client.Reader
	// status writes the agent's status to the control plane, at the
	// resourceVersion it carries: how a round is recorded as under way
	// before it acts (begin).
	status     client.SubResourceWriter
	record     event.Recorder
	now        func() time.Time
	lastRounds *lastRounds
	// metrics are the provider's ChaosAgent metrics; nil records none.
	metrics *metrics
	// evict evicts a pod through the Eviction API.
	evict func(ctx context.Context, p *corev1.Pod) error
}

// Observe reports whether a round is due; it writes nothing to the target
// cluster.
//
// The external resource of an agent is its backup: while the agent lives it
// always counts as existing (before the first change there is nothing to back
// up), so every round runs in Update and Create is never called
// (docs/architecture.md, "Write order", says why a kind works so). Once the agent is deleted, it exists
// for as long as its backup ConfigMap does, and Delete reverts and removes it.
func (e *external) Observe(ctx context.Context, ca *v1alpha1.ChaosAgent) (managed.ExternalObservation, error) {
	if meta.WasDeleted(ca) {
		e.lastRounds.forget(ca)
		e.metrics.forget(ca)
		b := e.backup(ca)
		if err := b.load(ctx); err != nil {
			return managed.ExternalObservation{}, err
		}
		return managed.ExternalObservation{ResourceExists: b.cm != nil}, nil
	}
	s, err := Compile(ca.Spec.ForProvider)
	if err != nil {
		ca.SetConditions(xpv2.Unavailable().WithMessage("invalid spec.forProvider: " + err.Error()))
		return managed.ExternalObservation{}, errors.Wrap(err, "invalid spec.forProvider")
	}
	e.lastRounds.recall(ca)
	e.closeCutShort(ca)
	// Recoveries are measured whatever else happens: a stopped agent's
	// verdicts matter most.
	if err := e.probe(ctx, ca, s); err != nil {
		return managed.ExternalObservation{}, err
	}
	o := &ca.Status.AtProvider
	now := e.now()
	due := dueAt(*o, s.Interval, now)
	st, err := e.configStop(ctx, ca)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	if st != nil {
		// Looked at again when the next round would be due.
		msg := st.String()
		e.acting(ca, st.reason, msg)
		o.LastRoundSummary = "nothing happened: " + msg
		next := metav1.NewTime(due)
		if !due.After(now) {
			next = metav1.NewTime(now.Add(s.Interval))
		}
		o.NextRoundTime = &next
		if o.LastRoundTime == nil {
			ca.SetConditions(xpv2.Unavailable().WithMessage("no round has run yet: " + msg))
		}
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	}
	if quiet, until := Quiet(s.Windows, now); quiet {
		msg := "quiet window until " + until.UTC().Format(time.RFC3339)
		e.acting(ca, v1alpha1.ReasonQuietWindow, msg)
		o.LastRoundSummary = "nothing happened: " + msg
		next := metav1.NewTime(latest(until, due))
		o.NextRoundTime = &next
		if o.LastRoundTime == nil {
			ca.SetConditions(xpv2.Unavailable().WithMessage("no round has run yet: " + msg))
		}
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	}
	next := metav1.NewTime(due)
	o.NextRoundTime = &next
	if o.LastRoundTime == nil {
		ca.SetConditions(xpv2.Unavailable().WithMessage("no round has run yet"))
	}
	if now.Before(due) {
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	}
	if !mayUpdate(ca) {
		// Update never runs under an Observe-only policy: the agent records
		// here what it would do, and changes nothing.
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, e.round(ctx, ca, s, true)
	}
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false}, nil
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// mayUpdate reports whether the management policies let the agent change
// anything.
func mayUpdate(ca *v1alpha1.ChaosAgent) bool {
	p := ca.GetManagementPolicies()
	return managed.NewManagementPoliciesResolver(len(p) > 0, p).ShouldUpdate()
}

// Create does nothing, and is never called: Observe never reports a living
// agent missing, and a deleted one is never created. It is here because every
// external client has one.
func (e *external) Create(context.Context, *v1alpha1.ChaosAgent) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

// Update runs the round that Observe found due.
func (e *external) Update(ctx context.Context, ca *v1alpha1.ChaosAgent) (managed.ExternalUpdate, error) {
	s, err := Compile(ca.Spec.ForProvider)
	if err != nil {
		return managed.ExternalUpdate{}, errors.Wrap(err, "invalid spec.forProvider")
	}
	return managed.ExternalUpdate{}, e.round(ctx, ca, s, s.DryRun)
}

// Delete restores what the agent changed, unless revertOnDelete is off, and
// removes its backup.
func (e *external) Delete(ctx context.Context, ca *v1alpha1.ChaosAgent) (managed.ExternalDelete, error) {
	ca.SetConditions(xpv2.Deleting())
	b := e.backup(ca)
	if err := b.load(ctx); err != nil {
		return managed.ExternalDelete{}, err
	}
	if ptr.Deref(ca.Spec.ForProvider.RevertOnDelete, true) {
		if err := e.revert(ctx, ca, b); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	return managed.ExternalDelete{}, b.delete(ctx)
}

func (e *external) Disconnect(context.Context) error { return nil }

func (e *external) backup(ca *v1alpha1.ChaosAgent) *backup {
	return &backup{c: e.cluster.Client, agent: ca, local: e.cluster.Local}
}

func (e *external) check(ctx context.Context) checkFn {
	return func(own, ns string) error { return e.cluster.CheckNamespace(ctx, own, ns) }
}

// round decides and carries out one round, and records it in status. In a dry
// run it only reads. Namespaces whose kill switch is on are left out, the
// steady-state guard is checked before anything is decided, and both kill
// switches are read again before every single action.
func (e *external) round(ctx context.Context, ca *v1alpha1.ChaosAgent, s Spec, dry bool) error {
	now := e.now()
	o := &ca.Status.AtProvider
	namespaces, notes, err := e.targetNamespaces(ctx, ca, s)
	if err != nil {
		return err
	}
	active, stopped, err := e.unstopped(ctx, namespaces)
	if err != nil {
		return err
	}
	o.StoppedNamespaces = nil
	if len(stopped) > 0 {
		o.StoppedNamespaces = slices.Clone(stopped[:min(len(stopped), maxStoppedNamespaces)])
		notes = append(notes, fmt.Sprintf("stopped by the %s annotation in namespace(s) %s", v1alpha1.AnnotationStop, strings.Join(o.StoppedNamespaces, ", ")))
	}
	round := o.RoundsRun + 1
	finish := func(done []v1alpha1.ChaosAction, reasons []string) {
		t := metav1.NewTime(now)
		next := metav1.NewTime(now.Add(s.Interval))
		o.RoundsRun, o.LastRoundTime, o.NextRoundTime, o.TargetNamespaces = round, &t, &next, namespaces
		o.RoundUnderWay = nil
		o.LastRoundSummary = summarize(done, reasons)
		e.lastRounds.remember(ca)
		if !slices.ContainsFunc(done, func(a v1alpha1.ChaosAction) bool { return a.Action != v1alpha1.ActionEvictionRefused }) {
			e.record.Event(ca, event.Normal(reasonNothingHappened, upperFirst(o.LastRoundSummary)))
		}
		switch {
		case len(namespaces) == 0:
			ca.SetConditions(xpv2.Unavailable().WithMessage("no namespace to act in: " + strings.Join(notes, "; ")))
		default:
			ca.SetConditions(xpv2.Available())
		}
	}
	if len(namespaces) > 0 && len(active) == 0 {
		msg := fmt.Sprintf("stopped by the %s annotation on every target namespace (%s)", v1alpha1.AnnotationStop, strings.Join(o.StoppedNamespaces, ", "))
		e.acting(ca, v1alpha1.ReasonStoppedByNamespace, msg)
		finish(nil, notes)
		return nil
	}
	violations, err := e.steady(ctx, s.Steady, active)
	if err != nil {
		return err
	}
	if len(violations) > 0 {
		msg := "paused: steady state does not hold: " + strings.Join(violations, "; ")
		e.acting(ca, v1alpha1.ReasonSteadyStateViolated, msg)
		finish(nil, append(notes, msg))
		return nil
	}
	w, err := e.world(ctx, s, active, now)
	if err != nil {
		return err
	}
	seed := uint64(now.UnixNano())
	if s.Seed != nil {
		seed = uint64(*s.Seed) //nolint:gosec // Any bits will do.
	}
	choice := Choose(s, w, rand.New(rand.NewPCG(seed, uint64(round)))) //nolint:gosec // Chaos, not cryptography.

	o.Plan = planned(dry, choice.Actions)
	reasons := append(slices.Clone(notes), choice.Reasons...)
	b := e.backup(ca)
	if !dry && slices.ContainsFunc(choice.Actions, func(a Action) bool {
		return a.Kind == v1alpha1.ActionScaleDeployment || a.Kind == v1alpha1.ActionRewriteConfigMap
	}) {
		if err := b.load(ctx); err != nil {
			return err
		}
	}
	if !dry && len(choice.Actions) > 0 {
		if err := e.begin(ctx, ca, round, now, s.Interval, len(choice.Actions)); err != nil {
			return err
		}
	}
	r := acted{reasons: reasons, stopped: stopped}
	e.carryOut(ctx, ca, b, s, choice.Actions, round, now, dry, &r)
	e.actedUnless(ca, r.halted, len(namespaces), len(r.stopped))
	finish(r.done, r.reasons)
	return errors.Join(r.errs...)
}

// acted is what a round's actions came to.
type acted struct {
	done    []v1alpha1.ChaosAction
	reasons []string
	// stopped are the namespaces whose kill switch is on; halted is the
	// agent's own, when thrown during the round.
	stopped []string
	halted  *stop
	errs    []error
}

// carryOut carries out a round's planned actions, reading both kill switches
// again before each, and records each action in status and as an event.
func (e *external) carryOut(ctx context.Context, ca *v1alpha1.ChaosAgent, b *backup, s Spec, actions []Action, round int64, now time.Time, dry bool, r *acted) {
	o := &ca.Status.AtProvider
	for _, a := range actions {
		// The switches may have been thrown since the round began.
		st, err := e.mayAct(ctx, ca, a.Namespace)
		if err != nil {
			r.errs = append(r.errs, err)
			continue
		}
		if st != nil {
			r.reasons = append(r.reasons, fmt.Sprintf("%s %s/%s left alone: %s", a.Kind, a.Namespace, a.Name, st))
			if st.reason == v1alpha1.ReasonStoppedByConfig {
				r.halted = st
				return
			}
			if !slices.Contains(r.stopped, a.Namespace) {
				r.stopped = append(r.stopped, a.Namespace)
				o.StoppedNamespaces = slices.Clone(r.stopped[:min(len(r.stopped), maxStoppedNamespaces)])
			}
			continue
		}
		// Recovery is timed from just before the write that disturbs.
		at := e.now()
		out, err := e.act(ctx, b, s, a, round, now, dry)
		if err != nil {
			r.errs = append(r.errs, err)
			continue
		}
		if out.note != "" {
			r.reasons = append(r.reasons, out.note)
		}
		if out.action == nil {
			continue
		}
		record(o, *out.action)
		r.done = append(r.done, *out.action)
		e.announce(ca, out.object, event.Normal(event.Reason(out.action.Action), upperFirst(describe(*out.action))), out.action.DryRun)
		if !out.action.DryRun {
			e.metrics.countAction(ca.GetNamespace()+"/"+ca.GetName(), out.action.Action, out.action.Namespace)
			if out.workload != nil && out.action.Action != v1alpha1.ActionEvictionRefused {
				o.Verdicts = Disturbed(o.Verdicts, *out.workload, at)
			}
		}
	}
}

// actedUnless sets the Acting condition after a round's actions: halted by
// the agent's own kill switch, stopped in every target namespace or some of
// them, or acting.
func (e *external) actedUnless(ca *v1alpha1.ChaosAgent, halted *stop, namespaces, stopped int) {
	o := &ca.Status.AtProvider
	switch {
	case halted != nil:
		e.acting(ca, halted.reason, halted.String())
	case namespaces > 0 && stopped >= namespaces:
		e.acting(ca, v1alpha1.ReasonStoppedByNamespace, fmt.Sprintf("stopped by the %s annotation on every target namespace (%s)", v1alpha1.AnnotationStop, strings.Join(o.StoppedNamespaces, ", ")))
	case stopped > 0:
		e.acting(ca, v1alpha1.ReasonActing, fmt.Sprintf("acting, but not in namespace(s) %s: stopped by the %s annotation", strings.Join(o.StoppedNamespaces, ", "), v1alpha1.AnnotationStop))
	default:
		e.acting(ca, v1alpha1.ReasonActing, "")
	}
}

// unstopped splits namespaces into those the agent may act in and those whose
// kill switch is on.
func (e *external) unstopped(ctx context.Context, namespaces []string) (active, stopped []string, err error) {
	for _, ns := range namespaces {
		st, err := e.namespaceStop(ctx, ns)
		if err != nil {
			return nil, nil, err
		}
		if st != nil {
			stopped = append(stopped, ns)
			continue
		}
		active = append(active, ns)
	}
	return active, stopped, nil
}

// world reads the candidates of the enabled modes in the given namespaces.
func (e *external) world(ctx context.Context, s Spec, namespaces []string, now time.Time) (World, error) {
	w := World{Namespaces: namespaces, ProviderNamespace: e.cluster.Reach.ProviderNamespace, Now: now}
	for _, ns := range namespaces {
		in := client.InNamespace(ns)
		if s.Tantrum {
			l := &corev1.PodList{}
			if err := e.cluster.Client.List(ctx, l, in, client.MatchingLabelsSelector{Selector: s.PodSelector}); err != nil {
				return w, errors.Wrapf(err, "cannot list pods in namespace %q", ns)
			}
			for i := range l.Items {
				p := &l.Items[i]
				w.Pods = append(w.Pods, Pod{Object: objectOf(p), Created: p.CreationTimestamp.Time, Phase: p.Status.Phase, Terminating: p.DeletionTimestamp != nil})
			}
		}
		if s.Cancer {
			l := &appsv1.DeploymentList{}
			if err := e.cluster.Client.List(ctx, l, in, client.MatchingLabelsSelector{Selector: s.DeploymentSelector}); err != nil {
				return w, errors.Wrapf(err, "cannot list Deployments in namespace %q", ns)
			}
			for i := range l.Items {
				d := &l.Items[i]
				w.Deployments = append(w.Deployments, Deployment{Object: objectOf(d), Replicas: ptr.Deref(d.Spec.Replicas, 1)})
			}
		}
		if s.Ipsum {
			l := &corev1.ConfigMapList{}
			if err := e.cluster.Client.List(ctx, l, in, client.MatchingLabelsSelector{Selector: s.ConfigMapSelector}); err != nil {
				return w, errors.Wrapf(err, "cannot list ConfigMaps in namespace %q", ns)
			}
			for i := range l.Items {
				c := &l.Items[i]
				w.ConfigMaps = append(w.ConfigMaps, ConfigMap{Object: objectOf(c), Immutable: ptr.Deref(c.Immutable, false), Keys: len(c.Data)})
			}
		}
	}
	return w, nil
}

// announce records an event on the agent and, when the target cluster is the
// agent's own and the action was real, on the object acted on as well.
func (e *external) announce(ca *v1alpha1.ChaosAgent, obj client.Object, ev event.Event, dry bool) {
	e.record.Event(ca, ev)
	if obj != nil && e.cluster.Local && !dry {
		e.record.Event(obj, event.Normal(ev.Reason, fmt.Sprintf("ChaosAgent %s/%s: %s", ca.GetNamespace(), ca.GetName(), ev.Message)))
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
