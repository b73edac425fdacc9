// Package copyrule copies ConfigMaps and Secrets from a source namespace into
// target namespaces and keeps the copies equal to their sources.
package copyrule

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

const (
	reasonSynced      event.Reason = "SyncedCopies"
	reasonWriteFailed event.Reason = "CannotWriteCopies"
)

// Setup adds the CopyRule controller to mgr.
func Setup(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver) error {
	ws := watchset.New(o.Logger.WithValues("controller", managed.ControllerName(v1alpha1.CopyRuleGroupKind)))
	return managedkind.Setup(mgr, o, r, managedkind.Kind[*v1alpha1.CopyRule]{
		GroupKind: v1alpha1.CopyRuleGroupKind,
		Kind:      resource.ManagedKind(v1alpha1.CopyRuleGroupVersionKind),
		Object:    &v1alpha1.CopyRule{},
		List:      &v1alpha1.CopyRuleList{},
		NewClient: func(c *target.Cluster, rec event.Recorder, _ *v1alpha1.CopyRule) managed.TypedExternalClient[*v1alpha1.CopyRule] {
			return &external{cluster: c, record: rec, watches: ws, now: time.Now}
		},
		// Sources, copies and namespaces are watched narrowly, as metadata, on
		// the cluster the rule acts on: a change enqueues the rule at once.
		WatchSet: ws,
	})
}

type external struct {
	cluster *target.Cluster
	record  event.Recorder
	watches *watchset.Set
	now     func() time.Time

	// plan is what Observe found to do; Update carries it out.
	plan Plan
}

func owner(cr *v1alpha1.CopyRule) Owner {
	return Owner{UID: string(cr.GetUID()), Namespace: cr.GetNamespace(), Name: cr.GetName()}
}

func sourceNamespace(cr *v1alpha1.CopyRule) string {
	if ns := cr.Spec.ForProvider.SourceNamespace; ns != "" {
		return ns
	}
	return cr.GetNamespace()
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
	nss, err := e.namespaces(ctx)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	reachable := e.reach(cr, nss)
	if meta.WasDeleted(cr) {
		if err := e.watch(cr, cr.Status.AtProvider.Problems); err != nil {
			return managed.ExternalObservation{}, err
		}
		copies, err := readCopies(ctx, e.cluster.Client, p.Kind, string(cr.GetUID()))
		if err != nil {
			return managed.ExternalObservation{}, err
		}
		for _, c := range copies {
			if reachable(c.Namespace) == nil {
				return managed.ExternalObservation{ResourceExists: true}, nil
			}
		}
		return managed.ExternalObservation{ResourceExists: false}, nil
	}
	src := sourceNamespace(cr)
	if err := reachable(src); err != nil {
		cr.SetConditions(xpv2.Unavailable().WithMessage("the source namespace is out of reach: " + err.Error()))
		return managed.ExternalObservation{}, errors.Wrap(err, "cannot read the source namespace")
	}
	sources, refused, err := readSources(ctx, e.cluster.Client, p, src)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	targets, err := SelectTargets(p, cr.GetNamespace(), src, nss, e.cluster.Reach)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	copies, err := readCopies(ctx, e.cluster.Client, p.Kind, string(cr.GetUID()))
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	occupied, err := e.occupied(ctx, cr, sources, targets, copies)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.plan = MakePlan(PlanInput{
		Owner: owner(cr), Sources: sources, Targets: targets, Copies: copies, Occupied: occupied,
		Policy: p.ConflictPolicy, MayDelete: mayDelete(cr), Reachable: reachable,
	})
	for _, n := range slices.Sorted(maps.Keys(refused)) {
		e.plan.Problems = append(e.plan.Problems, v1alpha1.CopyProblem{Namespace: src, Name: n, Reason: v1alpha1.ProblemRefused, Message: refused[n]})
	}
	if err := e.watch(cr, e.plan.Problems); err != nil {
		return managed.ExternalObservation{}, err
	}

	o := &cr.Status.AtProvider
	o.Sources = int32(len(sources))
	o.ObservedSources = nil
	for _, s := range sources {
		if len(o.ObservedSources) == v1alpha1.MaxObservedSources {
			break
		}
		o.ObservedSources = append(o.ObservedSources, v1alpha1.ObservedSource{Name: s.Name, ResourceVersion: s.ResourceVersion})
	}
	e.report(cr, e.plan.Problems, e.plan.InSync, 0, false)
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: len(e.plan.Actions) == 0}, nil
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
	for _, s := range sources {
		for _, ns := range t.Namespaces {
			ref := Ref{ns, s.Name}
			if have[ref] || !conflicted[ref] {
				continue
			}
			o, found, err := get(ctx, e.cluster.Client, cr.Spec.ForProvider.Kind, ref)
			if err != nil {
				return nil, errors.Wrapf(err, "cannot get %s %q in namespace %q", cr.Spec.ForProvider.Kind, ref.Name, ref.Namespace)
			}
			if found {
				out[ref] = o
			}
		}
	}
	return out, nil
}

// watch keeps the rule's watches: its sources, its copies, the namespaces,
// and the objects in the way of its copies, whose removal frees the place.
func (e *external) watch(cr *v1alpha1.CopyRule, problems []v1alpha1.CopyProblem) error {
	p := cr.Spec.ForProvider
	res := corev1.SchemeGroupVersion.WithResource(strings.ToLower(p.Kind) + "s")
	src := sourceNamespace(cr)
	ws := []watchset.Watch{
		namespacesWatch,
		{Resource: res, Labels: LabelRuleUID + "=" + string(cr.GetUID())},
	}
	if p.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil {
			return errors.Wrap(err, "spec.forProvider.selector is not a valid label selector")
		}
		ws = append(ws, watchset.Watch{Resource: res, Namespace: src, Labels: s.String()})
	}
	for _, n := range p.Names {
		ws = append(ws, watchset.Watch{Resource: res, Namespace: src, Fields: "metadata.name=" + n})
	}
	for _, pr := range problems {
		if pr.Reason == v1alpha1.ProblemConflict {
			ws = append(ws, watchset.Watch{Resource: res, Namespace: pr.Namespace, Fields: "metadata.name=" + pr.Name})
		}
	}
	owner := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	e.watches.SetInterest(owner, interest(cr))
	return errors.Wrap(e.watches.Ensure(owner, e.cluster, ws...), "cannot watch the rule's sources and copies")
}

// interest is what of the namespaces watch concerns the rule: its source and
// own namespaces, and the namespaces its target mode selects (before or after
// a change). Every other namespace's events would reconcile every rule of the
// cluster for nothing: with many rules and namespaces coming and going, a storm.
func interest(cr *v1alpha1.CopyRule) watchset.Interest {
	match, err := matcher(cr.Spec.ForProvider)
	if err != nil {
		return nil
	}
	src, own := sourceNamespace(cr), cr.GetNamespace()
	return func(w watchset.Watch, o *metav1.PartialObjectMetadata) bool {
		if w != namespacesWatch {
			return true
		}
		return o.Name == src || o.Name == own || match(Namespace{Name: o.Name, Labels: o.Labels})
	}
}

// namespacesWatch is every rule's watch of the namespaces of its cluster. It
// keeps their labels, so that rules read namespaces from it rather than list
// them all on every reconcile.
var namespacesWatch = watchset.Watch{Resource: corev1.SchemeGroupVersion.WithResource("namespaces"), ReadLabels: true}

// namespaces returns the cluster's namespaces: from the namespaces watch once
// it has synced, from the API server before.
func (e *external) namespaces(ctx context.Context) ([]Namespace, error) {
	l, ok := e.watches.List(e.cluster, namespacesWatch)
	if !ok {
		return readNamespaces(ctx, e.cluster.Client)
	}
	out := make([]Namespace, 0, len(l))
	for _, n := range l {
		out = append(out, Namespace{Name: n.Name, Labels: n.Labels, Terminating: n.DeletionTimestamp != nil})
	}
	return out, nil
}

// reach returns the reach check of the rule, deciding from the labels of the
// namespaces already read rather than reading each namespace again.
func (e *external) reach(cr *v1alpha1.CopyRule, nss []Namespace) func(ns string) error {
	labelsOf := make(map[string]map[string]string, len(nss))
	for _, n := range nss {
		labelsOf[n.Name] = n.Labels
	}
	return func(ns string) error { return e.cluster.Reach.Check(cr.GetNamespace(), ns, labelsOf[ns]) }
}

// report writes the counts, problems and Ready condition into the status.
func (e *external) report(cr *v1alpha1.CopyRule, problems []v1alpha1.CopyProblem, inSync, failed int, wrote bool) {
	o := &cr.Status.AtProvider
	wasInSync := o.LastFullSync != nil && o.CopiesInSync == o.IntendedCopies
	o.IntendedCopies = int32(e.plan.Intended)
	o.CopiesInSync = int32(inSync)
	o.Copies = fmt.Sprintf("%d/%d", inSync, e.plan.Intended)
	o.Failed = int32(failed)
	o.Skipped = int32(e.plan.Skipped)
	sort.SliceStable(problems, func(i, j int) bool {
		a, b := problems[i], problems[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	o.Problems, o.MoreProblems = problems, 0
	if len(problems) > v1alpha1.MaxProblems {
		o.Problems, o.MoreProblems = problems[:v1alpha1.MaxProblems], int32(len(problems)-v1alpha1.MaxProblems)
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

// Create has nothing to make: Observe reports a rule as existing, and Update
// writes the copies.
func (e *external) Create(context.Context, *v1alpha1.CopyRule) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

// Update carries out the plan Observe made, with bounded parallelism, and
// reports what it did in one event.
func (e *external) Update(ctx context.Context, cr *v1alpha1.CopyRule) (managed.ExternalUpdate, error) {
	p := cr.Spec.ForProvider
	w := &writer{c: e.cluster.Client, kind: p.Kind, owner: owner(cr), policy: p.ConflictPolicy}
	r := w.Run(ctx, e.plan.Actions, max(int(p.MaxParallelWrites), 1))
	e.plan.Skipped += r.Skipped
	problems := append(r.Problems, e.plan.Problems...) //nolint:gocritic // A new slice of both.
	e.report(cr, problems, e.plan.InSync+r.Written, r.Failed, len(r.Done) > 0)
	if err := e.watch(cr, problems); err != nil {
		return managed.ExternalUpdate{}, err
	}
	if s := summary(p.Kind, r.Done); s != "" {
		e.record.Event(cr, event.Normal(reasonSynced, s))
	}
	if r.Failed > 0 {
		err := errors.Errorf("cannot write %d of %d %s copies; first: %s", r.Failed, len(e.plan.Actions), p.Kind, r.FirstFailure())
		e.record.Event(cr, event.Warning(reasonWriteFailed, err))
		return managed.ExternalUpdate{}, err
	}
	return managed.ExternalUpdate{}, nil
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
	nss, err := readNamespaces(ctx, e.cluster.Client)
	if err != nil {
		return managed.ExternalDelete{}, err
	}
	reachable := e.reach(cr, nss)
	copies, err := readCopies(ctx, e.cluster.Client, p.Kind, string(cr.GetUID()))
	if err != nil {
		return managed.ExternalDelete{}, err
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
	w := &writer{c: e.cluster.Client, kind: p.Kind, owner: owner(cr), policy: p.ConflictPolicy}
	r := w.Run(ctx, actions, max(int(p.MaxParallelWrites), 1))
	if s := summary(p.Kind, r.Done); s != "" {
		e.record.Event(cr, event.Normal(reasonSynced, s))
	}
	if r.Failed > 0 {
		return managed.ExternalDelete{}, errors.Errorf("cannot remove %d of %d %s copies; first: %s", r.Failed, len(actions), p.Kind, r.FirstFailure())
	}
	return managed.ExternalDelete{}, nil
}

func (e *external) Disconnect(context.Context) error { return nil }
