// Package copyrule copies ConfigMaps, Secrets and other namespaced objects
// from source namespaces into target namespaces and keeps the copies equal to
// their sources.
package copyrule

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/plan"
	"github.com/clusterops/provider-clusterops/internal/reach"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

const (
	reasonSynced      event.Reason = "SyncedCopies"
	reasonWriteFailed event.Reason = "CannotWriteCopies"
	// reasonSourceConflict: a copy name that sources of more than one source
	// namespace would write.
	reasonSourceConflict event.Reason = "SourceConflict"
)

// Setup adds the CopyRule controller to mgr.
func Setup(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver) error {
	ws := watchset.New(o.Logger.WithValues("controller", managed.ControllerName(v1alpha1.CopyRuleGroupKind)))
	known := newKnownCopies()
	access := newGrants()
	ws.OnForget(known.forget)
	dr, err := drift.NewReporter(o.Metrics)
	if err != nil {
		return err
	}
	oldest, err := newOldestUnsynced(o.Metrics)
	if err != nil {
		return err
	}
	staleAt, err := newStaleAt(o.Metrics)
	if err != nil {
		return err
	}
	rules := newOutOfSync(oldest, staleAt)
	// Half the shortest poll: a rule's first poll after a restart reads.
	resumeFor := time.Duration(float64(o.PollInterval) * (1 - o.PollJitter) / 2)
	return managedkind.Setup(mgr, o, r, managedkind.Kind[*v1alpha1.CopyRule]{
		GroupVersionKind: resource.ManagedKind(v1alpha1.CopyRuleGroupVersionKind),
		Object:           &v1alpha1.CopyRule{},
		List:             &v1alpha1.CopyRuleList{},
		OnStop:           rules.forgetAll,
		Forget: func(rule types.NamespacedName) {
			rules.set(rule, nil, 0)
			known.forget(rule)
		},
		NewClient: func(c *target.Cluster, rec event.Recorder, _ client.SubResourceWriter, _ *v1alpha1.CopyRule) managed.TypedExternalClient[*v1alpha1.CopyRule] {
			return &external{cluster: c, resolver: r, record: rec, drift: dr, watches: ws, known: known, grants: access, outOfSync: rules, now: time.Now, resumeFor: resumeFor}
		},
		PollHook: untilWaitEnds(known, time.Now),
		// Sources, copies and namespaces are watched narrowly, as metadata:
		// the copies and namespaces on the cluster the rule writes to, the
		// sources on the one it reads them on. A change enqueues the rule at
		// once.
		WatchSet: ws,
	})
}

// untilWaitEnds brings a resuming rule's next reconcile forward to the end
// of its wait for its watches: one whose list is refused never syncs and
// never enqueues it, and the rule would otherwise keep its old conditions
// until its poll. When the watches do sync first, their enqueue is earlier
// and the queue keeps that one.
func untilWaitEnds(k *knownCopies, now func() time.Time) managed.PollIntervalHook {
	return managedkind.PollUntil(now, func(cr *v1alpha1.CopyRule, _ time.Time) (time.Time, bool) {
		return k.waitEnds(cr.GetUID())
	})
}

type external struct {
	// cluster is where the copies are written (spec.providerConfigRef).
	cluster *target.Cluster
	// resolver resolves the source side's config, when the rule names one.
	resolver *target.Resolver
	// source is where Observe read the sources; Update watches them there.
	source *target.Cluster
	// src and dst are the kinds of the sources and the copies, as Observe
	// resolved them on their clusters.
	src, dst Mapping
	record   event.Recorder
	drift    *drift.Reporter
	watches  *watchset.Set
	// known is what the controller knows of each rule's copies unread.
	known *knownCopies
	// grants is whether the provider may read each kind, by cluster.
	grants *grants
	now    func() time.Time
	// resumeFor is how long after a rule decided from its digest its
	// reconciles may again (resume).
	resumeFor time.Duration

	// plan is what Observe found to do; Update carries it out.
	plan Plan
	// decided is what Observe made the plan from.
	decided decided

	// outOfSync keeps the oldest copy out of sync across rules.
	outOfSync *outOfSyncRules
	// before is the rule's problems and staleness as the reconcile found
	// them, which each report of it carries on from (Fresh).
	before      v1alpha1.CopyRuleObservation
	beforeFresh xpv2.Condition
	// warnedStale is set once this reconcile warned of stale copies.
	warnedStale bool
}

func owner(cr *v1alpha1.CopyRule) Owner {
	return Owner{UID: string(cr.GetUID()), Namespace: cr.GetNamespace(), Name: cr.GetName()}
}

// mayDelete reports whether the management policies let the rule delete,
// as crossplane-runtime's resolver decides it; unset policies are the
// default, which allows everything.
func mayDelete(cr *v1alpha1.CopyRule) bool {
	p := cr.GetManagementPolicies()
	return managed.NewManagementPoliciesResolver(len(p) > 0, p).ShouldDelete()
}

// Observe reads the sources, the target namespaces and the rule's copies, and
// plans the writes that bring the copies in sync. It never writes outside the
// rule's status. The rule exists as long as it is not deleted: an empty set
// of copies is a valid state, and all writes happen in Update.
func (e *external) Observe(ctx context.Context, cr *v1alpha1.CopyRule) (managed.ExternalObservation, error) {
	p := cr.Spec.ForProvider
	tgt := targetRef(cr)
	e.begin(cr)
	// The watches the rule reads from are joined before it reads: a
	// namespace made, or a copy changed, in between must reach it. Its other
	// watches it joins once it knows them (watch).
	own := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	var err error
	if e.dst, err = e.kind(ctx, cr, copyGVK(p), e.cluster); err != nil {
		if meta.WasDeleted(cr) && isKindError(err) {
			// Objects of a kind the cluster serves no more went with it.
			return managed.ExternalObservation{ResourceExists: false}, nil
		}
		return managed.ExternalObservation{}, err
	}
	e.watches.SetInterest(own, interest(cr))
	if err := e.watches.Join(own, e.cluster, namespacesWatch, copiesWatch(cr, e.dst)); err != nil {
		return managed.ExternalObservation{}, errors.Wrap(err, "cannot watch the namespaces and the rule's copies")
	}
	nss, err := e.namespaces(ctx)
	if err != nil {
		return managed.ExternalObservation{}, sideError(err, "target", tgt)
	}
	reachable := e.reach(cr, nss)
	if meta.WasDeleted(cr) {
		return e.observeDeleted(ctx, cr, reachable)
	}
	srcCl, srcNSs, notTargets, err := e.sourceSide(ctx, cr, nss)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	targets, err := SelectTargets(p, cr.GetNamespace(), notTargets, nss, e.cluster.Reach)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	switch r, err := e.resume(cr, srcCl, srcNSs, targets); {
	case err != nil:
		return managed.ExternalObservation{}, err
	case r != readAll:
		// In sync as last found, or to be decided once its watches have
		// synced: the status stays as it is.
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	}
	all, refused, err := readSources(ctx, srcCl.Client, p, e.src, srcNSs, e.held(srcCl, p))
	if err != nil {
		return managed.ExternalObservation{}, sideError(err, "source", sourceRef(cr))
	}
	// The source watches, new ones listing them, have nothing to tell of
	// the sources as read. A rule with many sources is reconciled once more
	// by a new watch rather than remember each.
	if len(all) <= readEachUpTo {
		for _, o := range all {
			e.watches.Read(own, srcCl, e.src.Resource, o.Namespace, o.Name, o.ResourceVersion)
		}
	}
	tr := NewTransform(p)
	sources, conflicts := SourceConflicts(all, tr.Name)
	copies, err := e.copies(ctx, cr, reachable)
	if err != nil {
		return managed.ExternalObservation{}, sideError(err, "target", tgt)
	}
	occupied, err := e.occupied(ctx, cr, sources, targets, copies)
	if err != nil {
		return managed.ExternalObservation{}, sideError(err, "target", tgt)
	}
	in := PlanInput{
		Owner: owner(cr), Sources: sources, Targets: targets, Copies: copies, Occupied: occupied,
		// A plan shows what all policies would do, prunes included.
		Policy: p.ConflictPolicy, MayDelete: mayDelete(cr) || plan.Only(cr), Reachable: reachable, Transform: tr,
		Conflicted: conflicts, Synced: drift.Synced(cr), Planning: plan.Only(cr),
	}
	e.plan = MakePlan(in)
	if refs := summarized(copies, e.plan.Actions); len(refs) > 0 {
		// The copies to write whole are read, and the plan made again from
		// them: the same decisions, unless one changed in between.
		if in.Copies, err = e.whole(ctx, cr, copies, refs); err != nil {
			return managed.ExternalObservation{}, sideError(err, "target", tgt)
		}
		e.plan = MakePlan(in)
	}
	e.problems(cr, refused, conflicts)
	if err := e.watch(cr, e.plan.Problems); err != nil {
		return managed.ExternalObservation{}, err
	}
	e.observed(cr, srcCl, all, in.Copies, targets)
	e.planned(cr, in.Planning)
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: len(e.plan.Actions) == 0}, nil
}

// sourceSide resolves the cluster and kind rule cr reads its sources as,
// checks that it may read every source namespace, and joins the watches of
// its selector there. It returns the source cluster and namespaces, and the
// namespaces that can never be targets.
func (e *external) sourceSide(ctx context.Context, cr *v1alpha1.CopyRule, nss []Namespace) (*target.Cluster, []string, []string, error) {
	p := cr.Spec.ForProvider
	srcCl, err := e.sourceCluster(ctx, cr)
	if err != nil {
		return nil, nil, nil, err
	}
	e.source = srcCl
	if e.src, err = e.kind(ctx, cr, sourceGVK(p), srcCl); err != nil {
		return nil, nil, nil, sideError(err, "source", sourceRef(cr))
	}
	srcNSs := SourceNamespaces(p, cr.GetNamespace())
	check, notTargets := sourceReach(ctx, e.cluster, srcCl, cr.GetNamespace(), srcNSs, nss)
	if err := checkSources(srcNSs, check); err != nil {
		cr.SetConditions(xpv2.Unavailable().WithMessage("a source namespace is out of reach: " + err.Error()))
		return nil, nil, nil, sideError(errors.Wrap(err, "cannot read the source namespaces"), "source", sourceRef(cr))
	}
	// The selector watches too, for a watch another rule already runs: an
	// object labeled between the read and the join would reach the rule at
	// its next poll. Name watches catch up when joined (watchset.Join).
	if sws := selectorWatches(p, e.src, srcNSs); len(sws) > 0 {
		own := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
		if err := e.watches.Join(own, srcCl, sws...); err != nil {
			return nil, nil, nil, errors.Wrap(err, "cannot watch the rule's sources")
		}
	}
	return srcCl, srcNSs, notTargets, nil
}

// observeDeleted says whether a deleted rule still has copies to delete:
// only the copies matter now, and the sources are watched no more.
func (e *external) observeDeleted(ctx context.Context, cr *v1alpha1.CopyRule, reachable func(string) error) (managed.ExternalObservation, error) {
	e.source = nil
	if err := e.watch(cr, cr.Status.AtProvider.Problems); err != nil {
		return managed.ExternalObservation{}, err
	}
	copies, err := e.copies(ctx, cr, reachable)
	if err != nil {
		return managed.ExternalObservation{}, sideError(err, "target", targetRef(cr))
	}
	for _, c := range copies {
		if reachable(c.Namespace) == nil {
			return managed.ExternalObservation{ResourceExists: true}, nil
		}
	}
	e.known.drop(owner(cr))
	e.outOfSync.set(types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}, nil, 0)
	return managed.ExternalObservation{ResourceExists: false}, nil
}

// problems adds to the plan the sources refused, and warns once of each
// conflict between sources as it appears, read from the last status.
func (e *external) problems(cr *v1alpha1.CopyRule, refused map[Ref]string, conflicts map[string][]Ref) {
	for _, r := range slices.SortedFunc(maps.Keys(refused), func(a, b Ref) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) }) {
		e.plan.Problems = append(e.plan.Problems, v1alpha1.CopyProblem{Namespace: r.Namespace, Name: r.Name, Reason: v1alpha1.ProblemRefused, Message: refused[r]})
	}
	for _, n := range NewConflicts(cr.Status.AtProvider.Problems, conflicts) {
		e.record.Event(cr, event.Warning(reasonSourceConflict, conflictEvent(n, conflicts[n])))
	}
}

// observed records in status what Observe read and planned, and the digest
// of its inputs once they alone describe the rule's state (describedByInputs).
func (e *external) observed(cr *v1alpha1.CopyRule, srcCl *target.Cluster, all, copies []Object, targets Targets) {
	o := &cr.Status.AtProvider
	o.Sources = count32(len(all))
	o.ObservedSources = nil
	for _, s := range all {
		if len(o.ObservedSources) == v1alpha1.MaxObservedSources {
			break
		}
		o.ObservedSources = append(o.ObservedSources, v1alpha1.ObservedSource{Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion})
	}
	e.report(cr, e.plan.Problems, e.plan.InSync, 0, false)
	e.decided = decided{sources: versionsOf(all), targets: targets}
	o.SyncedDigest = ""
	if len(e.plan.Actions) == 0 && describedByInputs(e.plan, e.plan.InSync, 0, len(copies), e.plan.Problems) {
		o.SyncedDigest = e.inputs(cr, srcCl, e.decided.sources, versionsOf(copies), targets).Digest()
	}
}

// occupied reads, where a copy is missing and the last reconcile met someone
// else's object, whether that object is still there. Other missing copies are
// simply created; a create that meets an object finds it then.
func (e *external) occupied(ctx context.Context, cr *v1alpha1.CopyRule, sources []Object, t Targets, copies []Object) (map[Ref]Object, error) {
	conflicted := map[Ref]bool{}
	for _, pr := range cr.Status.AtProvider.Problems {
		if pr.Reason == v1alpha1.ProblemConflict {
			conflicted[Ref{pr.Namespace, pr.Name}] = true
		}
	}
	have := make(map[Ref]bool, len(copies))
	for _, c := range copies {
		have[Ref{c.Namespace, c.Name}] = true
	}
	out := map[Ref]Object{}
	tr, kind := NewTransform(cr.Spec.ForProvider), e.dst
	for _, s := range sources {
		for _, ns := range t.Namespaces {
			ref := Ref{ns, tr.Name(s)}
			if have[ref] || !conflicted[ref] {
				continue
			}
			o, found, err := get(ctx, e.cluster.Client, kind, ref)
			if err != nil {
				return nil, errors.Wrapf(err, "cannot get %s %q in namespace %q", kind, ref.Name, ref.Namespace)
			}
			if found {
				out[ref] = o
			}
		}
	}
	return out, nil
}

// reach returns the reach check of the rule on the cluster it writes to,
// deciding from the labels of the namespaces already read rather than reading
// each namespace again.
func (e *external) reach(cr *v1alpha1.CopyRule, nss []Namespace) func(ns string) error {
	return reachIn(e.cluster.Reach, cr.GetNamespace(), nss)
}

// reachIn returns the check of policy r for a managed resource in namespace
// own, deciding from the labels of the namespaces nss already read.
func reachIn(r reach.Policy, own string, nss []Namespace) func(ns string) error {
	labelsOf := make(map[string]map[string]string, len(nss))
	for _, n := range nss {
		labelsOf[n.Name] = n.Labels
	}
	return func(ns string) error { return r.Check(own, ns, labelsOf[ns]) }
}

// Create has nothing to make: Observe reports a rule as existing, and Update
// writes the copies.
func (e *external) Create(context.Context, *v1alpha1.CopyRule) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

// Update carries out the plan Observe made, with bounded parallelism, and
// reports what it did in one event.
func (e *external) Update(ctx context.Context, cr *v1alpha1.CopyRule) (managed.ExternalUpdate, error) {
	p := cr.Spec.ForProvider
	w := e.writer(cr)
	r := w.Run(ctx, e.plan.Actions, max(int(p.MaxParallelWrites), 1))
	e.plan.Skipped += r.Skipped
	problems := append(r.Problems, e.plan.Problems...) //nolint:gocritic // A new slice of both.
	e.report(cr, problems, e.plan.InSync+r.Written, r.Failed, len(r.Done) > 0)
	e.digestWritten(cr, problems, r.Written, r.Failed)
	if err := e.watch(cr, problems); err != nil {
		return managed.ExternalUpdate{}, err
	}
	if s := summary(e.dst.Kind, r.Done); s != "" {
		e.record.Event(cr, event.Normal(reasonSynced, s))
	}
	e.repaired(cr, r.Repaired)
	if r.Failed > 0 {
		err := errors.Errorf("cannot write %d of %d %s copies; first: %s", r.Failed, len(e.plan.Actions), e.dst.Kind, r.FirstFailure())
		e.record.Event(cr, event.Warning(reasonWriteFailed, err))
		return managed.ExternalUpdate{}, err
	}
	return managed.ExternalUpdate{}, nil
}

// writer writes cr's copies. The events of its writes do not reconcile cr
// again (watchset's Writing): it knows what it wrote, and a rule writing N
// copies would otherwise be reconciled once more by their creation
// (TestOwnWritesDoNotEnqueueTheirOwner).
func (e *external) writer(cr *v1alpha1.CopyRule) *writer {
	p := cr.Spec.ForProvider
	nn := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	res := e.dst.Resource
	own := owner(cr)
	return &writer{c: e.cluster.Client, kind: e.dst, owner: own, policy: p.ConflictPolicy,
		writing: func(namespace, name, before string) func(string, error) {
			return e.watches.Writing(nn, e.cluster, res, namespace, name, before)
		},
		wrote: func(ref Ref, o *Object) { e.known.wrote(own, ref, o) }}
}

// summary is the one event of a reconcile's writes, e.g. "Created 3, updated 1
// ConfigMap copies".
func summary(kind string, done map[Op]int) string {
	var parts []string
	for _, x := range []struct {
		op   Op
		verb string
	}{{OpCreate, "created"}, {OpUpdate, "updated"}, {OpReplace, "replaced"}, {OpPrune, "pruned"}, {OpRelease, "released"}} {
		if n := done[x.op]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", x.verb, n))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	s := strings.Join(parts, ", ") + " " + kind + " copies"
	return strings.ToUpper(s[:1]) + s[1:]
}

// Delete deletes the copies the rule created and releases the objects it took
// over, in the namespaces it may still reach.
func (e *external) Delete(ctx context.Context, cr *v1alpha1.CopyRule) (managed.ExternalDelete, error) {
	p := cr.Spec.ForProvider
	if e.dst.Kind == "" {
		// Observe resolves it first in a reconcile; a caller that did not
		// has it resolved here.
		k, err := e.kind(ctx, cr, copyGVK(p), e.cluster)
		if err != nil {
			return managed.ExternalDelete{}, err
		}
		e.dst = k
	}
	nss, err := readNamespaces(ctx, e.cluster.Client)
	if err != nil {
		return managed.ExternalDelete{}, err
	}
	reachable := e.reach(cr, nss)
	copies, err := e.copies(ctx, cr, reachable)
	if err != nil {
		return managed.ExternalDelete{}, err
	}
	var taken []Ref
	for _, c := range copies {
		if TakenOver(c) && c.Summary != nil {
			taken = append(taken, Ref{c.Namespace, c.Name})
		}
	}
	if len(taken) > 0 {
		// A release writes the object whole.
		if copies, err = e.whole(ctx, cr, copies, taken); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	var actions []Action
	for _, c := range copies {
		if reachable(c.Namespace) != nil {
			continue
		}
		if TakenOver(c) {
			actions = append(actions, Action{Op: OpRelease, Object: Released(c)})
			continue
		}
		actions = append(actions, Action{Op: OpPrune, Object: c})
	}
	w := e.writer(cr)
	r := w.Run(ctx, actions, max(int(p.MaxParallelWrites), 1))
	if s := summary(e.dst.Kind, r.Done); s != "" {
		e.record.Event(cr, event.Normal(reasonSynced, s))
	}
	if r.Failed > 0 {
		return managed.ExternalDelete{}, errors.Errorf("cannot remove %d of %d %s copies; first: %s", r.Failed, len(actions), e.dst.Kind, r.FirstFailure())
	}
	return managed.ExternalDelete{}, nil
}

func (e *external) Disconnect(context.Context) error { return nil }

// count32 is a count for status, whose fields are int32 as the API conventions ask; counts of
// objects in one cluster stay far below its limit, which it keeps to should one not.
func count32(n int) int32 {
	return int32(min(n, math.MaxInt32)) //nolint:gosec // Clamped to the int32 range just now.
}
