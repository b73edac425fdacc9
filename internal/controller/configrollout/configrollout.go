package configrollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/ownwrite"
	"github.com/clusterops/provider-clusterops/internal/plan"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// AnnotationHash is the pod template annotation that carries the hash of the
// configuration; changing it is what rolls a workload.
const AnnotationHash = "workload.clusterops.io/config-hash"

// AnnotationLock, on a workload's own metadata (changing it rolls nothing),
// names the ConfigRollout the workload follows: two ConfigRollouts with
// different sources on one workload would overwrite each other's hash forever.
const AnnotationLock = "workload.clusterops.io/config-rollout"

// fieldManagerPrefix starts the field manager of each ConfigRollout, which owns
// the hash annotation and the lock, and nothing else, on its workloads.
const fieldManagerPrefix = "configrollout-"

// fieldManager is the field manager of a ConfigRollout (at most 128 characters).
func fieldManager(cr *v1alpha1.ConfigRollout) string {
	m := fieldManagerPrefix + cr.GetName()
	if len(m) > 128 {
		m = m[:128]
	}
	return m
}

const reasonRolled event.Reason = "RolledWorkload"

// reasonFollowing is the event of workloads a rollout starts to follow
// without rolling them.
const reasonFollowing event.Reason = "FollowingWorkloads"

// maxNamed bounds the workloads one event names, whatever the fleet.
const maxNamed = 5

// reasonSourceMissing is the Warning event of a rollout whose source does not
// exist, so that `kubectl describe` and event alerts show it, not only status.
const reasonSourceMissing event.Reason = "SourceMissing"

// workloadChanges passes a workload's creation, deletion, a new template
// (generation) or a changed lock. Other annotation churn, such as the
// revision a Deployment records on every rollout, would re-reconcile every
// ConfigRollout in the namespace for nothing.
var workloadChanges = builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
	UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[AnnotationLock] != e.ObjectNew.GetAnnotations()[AnnotationLock]
	},
	CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
	DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return false },
	GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
}))

// Setup adds the ConfigRollout controller to mgr.
func Setup(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver) error {
	ws := watchset.New(o.Logger.WithValues("controller", managed.ControllerName(v1alpha1.ConfigRolloutGroupKind)))
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.ConfigRollout{}, indexWorkloads, indexValues); err != nil {
		return errors.Wrap(err, "cannot index ConfigRollouts by workload")
	}
	// The lock of every workload, for a deleted rollout to find the ones it
	// holds without reading the namespace's workloads.
	for _, kind := range Kinds {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(GroupVersionKind(kind))
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), m, indexLock, func(o client.Object) []string {
			if c := o.GetAnnotations()[AnnotationLock]; c != "" {
				return []string{c}
			}
			return nil
		}); err != nil {
			return errors.Wrapf(err, "cannot index %ss by lock", kind)
		}
	}
	others, err := otherRollouts(mgr, o.Sharded())
	if err != nil {
		return err
	}
	own := ownwrite.New[ownwrite.Key]()
	wait := newWaiters()
	rd := newReaders(mgr.GetAPIReader())
	autos := newAutoRollouts()
	inf, err := mgr.GetCache().GetInformer(context.Background(), &v1alpha1.ConfigRollout{})
	if err != nil {
		return errors.Wrap(err, "cannot get the ConfigRollout informer")
	}
	if _, err := inf.AddEventHandler(autos.handler()); err != nil {
		return errors.Wrap(err, "cannot count auto ConfigRollouts")
	}
	met, err := newRolloutMetrics(o.Metrics)
	if err != nil {
		return err
	}
	return managedkind.Setup(mgr, o, r, managedkind.Kind[*v1alpha1.ConfigRollout]{
		GroupVersionKind: resource.ManagedKind(v1alpha1.ConfigRolloutGroupVersionKind),
		Object:           &v1alpha1.ConfigRollout{},
		List:             &v1alpha1.ConfigRolloutList{},
		OwnNamespace:     true,
		OnStop:           met.forgetAll,
		Forget:           met.forget,
		NewClient: func(c *target.Cluster, rec event.Recorder, status client.SubResourceWriter, cr *v1alpha1.ConfigRollout) managed.TypedExternalClient[*v1alpha1.ConfigRollout] {
			e := &external{cluster: c, record: rec, now: time.Now, watches: ws, own: own, waiting: wait, rollouts: others, status: status, metrics: met}
			if c.Local && (o.Watches == nil || o.Watches(cr.GetNamespace())) {
				// The workloads' metadata watches feed the manager's cache on
				// the provider's own cluster only, and on a sharded replica
				// only for its shards' namespaces.
				e.cache, e.readers = mgr.GetCache(), rd
			}
			return e
		},
		// Each source is watched by name, as metadata only, on the cluster the
		// ConfigRollout acts on: only referenced ConfigMaps and Secrets are
		// cached, never their content, and any change still bumps the
		// resourceVersion that brings an event.
		WatchSet: ws,
		// Workloads are watched as metadata only; an event reconciles the
		// rollouts that reference the workload (indexWorkloads).
		Watch: func(b *builder.Builder) *builder.Builder {
			return watchFollowers(wait.watchAll(watchWorkloads(o.Flow, b, mgr.GetClient(), rd, autos, own), mgr.GetClient()), others, mgr.GetClient(), rd, autos)
		},
		PollHook: untilDue(time.Now),
	})
}

// debounceDue is when the current change may be rolled out, and whether that
// is still to come.
func debounceDue(cr *v1alpha1.ConfigRollout, now time.Time) (time.Time, bool) {
	d, at := cr.Spec.ForProvider.Debounce, cr.Status.AtProvider.ChangedAt
	if d == nil || d.Duration <= 0 || at == nil {
		return time.Time{}, false
	}
	due := at.Add(d.Duration)
	return due, now.Before(due)
}

// heldByDebounce is when the workloads Observe held back for the debounce
// window may roll, and whether it held any. It goes by what Observe decided
// (the Ready reason), not by the clock: a window that closed between that
// decision and the poll hook still needs the reconcile that rolls them, or
// they would wait for the poll interval.
func heldByDebounce(cr *v1alpha1.ConfigRollout, now time.Time) (time.Time, bool) {
	if cr.GetCondition(xpv2.TypeReady).Reason != v1alpha1.ReasonDebouncing {
		return time.Time{}, false
	}
	if due, ok := debounceDue(cr, now); ok {
		return due, true
	}
	return now, true
}

type external struct {
	cluster *target.Cluster
	record  event.Recorder
	now     func() time.Time
	watches *watchset.Set
	own     *ownwrite.Filter[ownwrite.Key]
	// status writes the rollout's status at the resourceVersion it carries,
	// on the provider's own cluster: how a wave is recorded before its
	// workloads are rolled (intend); nil in unit tests.
	status client.SubResourceWriter
	// rollouts are every ConfigRollout of the cluster, whichever shard,
	// indexed by the workloads they follow (otherRollouts); nil in unit
	// tests.
	rollouts client.Reader
	// cache is the manager's metadata cache of the workloads, on the
	// provider's own cluster; nil on another.
	cache client.Reader
	// readers knows which sources the workloads of the provider's own
	// cluster read, shared by every rollout; nil on another cluster.
	readers *readers

	// observed is the status Observe worked out, which Update starts from:
	// state goes from Observe to Update as data (docs/architecture.md,
	// "Write order").
	observed v1alpha1.ConfigRolloutObservation

	// waiting routes in-flight workloads' status events to the staggered
	// rollouts that wait for them; gate is what Observe planned for one
	// (progress.go), nil when every pending workload rolls at once.
	waiting *waiters
	gate    *gate
	// metrics say which rollouts are under way, halted or held back.
	metrics *rolloutMetrics

	// contents are the sources' contents Observe read, Secrets' included:
	// held in memory for this reconcile only, for the per-workload hashes.
	contents []Content
	// rollNow says whether Update rolls the pending workloads: a debounce
	// window, a strategy or windows may hold them back.
	rollNow bool

	// wants are the hashes Observe worked out for each selected workload, by
	// "Kind/name" (see wanted).
	wants map[string]string
}

// Observe hashes the sources and compares the hash with what each selected
// workload carries. It never writes outside the ConfigRollout's status.
func (e *external) Observe(ctx context.Context, cr *v1alpha1.ConfigRollout) (managed.ExternalObservation, error) {
	if meta.WasDeleted(cr) {
		// A rollout on its way out waits for no workload, and is under way
		// no more.
		e.waiting.set(types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}, nil)
		e.metrics.forget(types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()})
		// Delete releases the locks; the hash annotations stay.
		held, err := lockedBy(ctx, e.cluster.Client, e.cache, cr.GetNamespace(), cr.GetName())
		if err != nil {
			return managed.ExternalObservation{}, err
		}
		return managed.ExternalObservation{ResourceExists: len(held) > 0}, nil
	}
	o := &cr.Status.AtProvider
	// The workloads are read while the sources are: neither depends on the
	// other, and a change waits for one round trip to the API server, not two,
	// before it is rolled.
	type selection struct {
		ws      []workload
		missing []string
		err     error
	}
	selected := make(chan selection, 1)
	go func() {
		ws, missing, err := selectWorkloads(ctx, e.cluster.Client, e.cache, e.readers, cr)
		selected <- selection{ws, missing, err}
	}()
	sources, missing, err := e.readSources(ctx, cr)
	sel := <-selected
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	// Watched after the read: a change in between is in a new watch's list
	// at another version than read, and one a running watch saw before the
	// rollout joined it is caught up on (watchset's missed); either
	// reconciles the rollout again.
	if err := e.watchSources(cr); err != nil {
		return managed.ExternalObservation{}, err
	}
	hashes := make([]string, 0, len(sources))
	for _, s := range sources {
		hashes = append(hashes, s.Hash)
	}
	before := o.Sources
	o.Sources = sources
	if h := Combined(hashes); h != o.Hash {
		now := metav1.NewTime(e.now())
		o.Hash, o.ChangedAt = h, &now
	}

	ws, missingWorkloads := sel.ws, sel.missing
	if sel.err != nil {
		return managed.ExternalObservation{}, sel.err
	}
	pending, locked, err := e.compare(ctx, cr, ws, len(missing) == 0)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	keepWave(o, pending)
	prev := o.Plan
	o.Plan = nil
	if plan.Only(cr) {
		o.Plan = planned(cr.Spec.ForProvider, cr.GetNamespace(), prev, before, sources, pending)
	}
	if err := e.planWave(cr, ws, pending); err != nil {
		return managed.ExternalObservation{}, err
	}
	e.observed = *o.DeepCopy()
	e.rollNow = e.conclude(cr, len(pending), missing, locked, missingWorkloads)
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: !e.rollNow}, nil
}

// compare records in status what each selected workload runs, against the
// hash it is to carry, and returns the "Kind/name" of those to roll and why
// others are not this rollout's. complete is false while a source is
// missing: nothing is followed on a partial view of the configuration.
func (e *external) compare(ctx context.Context, cr *v1alpha1.ConfigRollout, ws []workload, complete bool) (pending map[string]bool, locked []string, err error) {
	o := &cr.Status.AtProvider
	last, recorded := map[string]*metav1.Time{}, map[string]v1alpha1.RolledWorkload{}
	for _, w := range o.Workloads {
		last[w.Kind+"/"+w.Name], recorded[w.Kind+"/"+w.Name] = w.LastRollout, w
	}
	o.Workloads = make([]v1alpha1.RolledWorkload, 0, len(ws))
	pending = map[string]bool{}
	var followed []string
	for _, w := range ws {
		key := w.Kind + "/" + w.Name
		rec := recorded[key]
		by, err := e.followedBy(ctx, cr, w, rec)
		if err != nil {
			return nil, nil, err
		}
		if by != "" {
			locked = append(locked, fmt.Sprintf("%s %q follows ConfigRollout %q", w.Kind, w.Name, by))
			continue
		}
		want := e.want(cr, w, o.Hash)
		recent := rec.RecentRollouts
		carried, baseline, adopted := runs(w.templateHash(), w.Lock == cr.GetName(), rec, want, o.Hash, complete && !cr.Spec.ForProvider.RollOnAdoption)
		if adopted {
			followed = append(followed, fmt.Sprintf("%s %q", w.Kind, w.Name))
		}
		if rec.Hash != want && carried == want && !baseline && (rec.Hash != "" || w.Lock == cr.GetName()) {
			// A rollout of ours whose status write was lost (a conflict on a stale
			// read after the workload was patched): record it now, or the counter
			// and the time would never show it. When status recorded no hash for
			// the workload (its first rollout), our lock on it says the hash it
			// carries is ours: only a rollout writes the lock, and Delete
			// removes it. A stale read that counts again cannot write: its
			// status update conflicts.
			// One a wave cut short rolled was rolled when that wave was
			// recorded (waveAt).
			now := metav1.NewTime(e.now())
			if at := waveAt(o, key, want); at != nil {
				now = *at
			}
			o.Rollouts++
			last[key] = &now
			recent = remember(recent, now, limitOf(cr.Spec.ForProvider))
		}
		o.Workloads = append(o.Workloads, v1alpha1.RolledWorkload{Kind: w.Kind, Name: w.Name, Hash: carried, Baseline: baseline, LastRollout: last[key], RecentRollouts: recent})
		if !upToDate(carried, want, o.Hash) {
			pending[key] = true
		}
	}
	e.following(cr, followed)
	return pending, locked, nil
}

// conclude sets the Ready condition from what Observe found, and reports
// whether Update is to roll the pending workloads now.
func (e *external) conclude(cr *v1alpha1.ConfigRollout, pending int, missing, locked, missingWorkloads []string) bool {
	switch {
	case len(missing) > 0:
		// Nothing is rolled, or followed, on a partial view of the
		// configuration; the source's creation brings us back.
		msg := strings.Join(missing, ", ") + " does not exist: nothing is rolled until it does"
		cr.SetConditions(xpv2.Unavailable().WithMessage(msg))
		// The same event again only raises its count; observing happens on
		// watch events and the poll, so this is no stream of events.
		e.record.Event(cr, event.Warning(reasonSourceMissing, errors.New(msg)))
	case pending > 0:
		if due, waiting := debounceDue(cr, e.now()); waiting {
			c := xpv2.Unavailable().WithMessage(fmt.Sprintf("%d workloads to roll after the debounce window, at %s", pending, due.UTC().Format(time.RFC3339)))
			c.Reason = v1alpha1.ReasonDebouncing
			cr.SetConditions(c)
			return false
		}
		if e.heldBack(cr) {
			// A strategy or windows hold the pending workloads back for now.
			return false
		}
		cr.SetConditions(xpv2.Unavailable().WithMessage(fmt.Sprintf("%d workloads to roll", pending)))
		return true
	case len(locked) > 0:
		cr.SetConditions(xpv2.Unavailable().WithMessage(strings.Join(locked, ", ") + ": a workload follows one ConfigRollout, so it is not rolled by this one"))
	case len(missingWorkloads) > 0:
		cr.SetConditions(xpv2.Unavailable().WithMessage(strings.Join(missingWorkloads, ", ") + " does not exist"))
	default:
		cr.SetConditions(xpv2.Available())
	}
	return false
}

// Create has nothing to make: a ConfigRollout only acts on what exists.
func (e *external) Create(context.Context, *v1alpha1.ConfigRollout) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

// Update writes the current hash into the pod template of every selected
// workload that runs an older configuration; the workload's controller rolls
// its pods. The wave is recorded in status before the first write (intend),
// and cleared once every workload of it is written.
func (e *external) Update(ctx context.Context, cr *v1alpha1.ConfigRollout) (managed.ExternalUpdate, error) {
	cr.Status.AtProvider = *e.observed.DeepCopy()
	e.rolling(cr)
	roll := e.toRoll(&cr.Status.AtProvider)
	if err := e.intend(ctx, cr, roll); err != nil {
		return managed.ExternalUpdate{}, err
	}
	wave := make(map[string]string, len(roll))
	for _, x := range roll {
		wave[workloadKey(x.Kind, x.Name)] = x.Hash
	}
	o := &cr.Status.AtProvider
	for i := range o.Workloads {
		w := &o.Workloads[i]
		want, ok := wave[workloadKey(w.Kind, w.Name)]
		if !ok {
			continue
		}
		if err := e.roll(ctx, cr, w.Kind, w.Name, want); err != nil {
			return managed.ExternalUpdate{}, err
		}
		now := metav1.NewTime(e.now())
		w.Hash, w.LastRollout, w.Baseline = want, &now, false
		w.RecentRollouts = remember(w.RecentRollouts, now, limitOf(cr.Spec.ForProvider))
		o.Rollouts++
		e.record.Event(cr, event.Normal(reasonRolled, fmt.Sprintf("Rolled %s %q: its configuration changed (hash %s)", w.Kind, w.Name, want)))
	}
	o.Wave = nil
	e.rolledWave(cr)
	return managed.ExternalUpdate{}, nil
}

// roll applies only the hash annotation and the lock, under the
// ConfigRollout's own field manager, so it never touches what others own in
// the workload; a manual edit of the annotation is drift and is taken back.
func (e *external) roll(ctx context.Context, cr *v1alpha1.ConfigRollout, kind, name, hash string) error {
	u, err := rollPatch(cr, kind, name, hash)
	if err != nil {
		return err
	}
	err = e.apply(ctx, cr, kind, name, u)
	if err == nil && cr.Spec.ForProvider.Auto && e.readers != nil {
		// The response is the workload at its new generation: what its template
		// reads is known without a read, for the event of this write and for
		// the other rollouts of the namespace that list it.
		o, tmpl := newObject(kind)
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o) == nil {
			e.readers.learn(kind, o, tmpl)
		}
	}
	return errors.Wrapf(err, "cannot roll %s %q", kind, name)
}

// apply sends a server-side apply patch of the rollout's own fields to a
// workload, telling the event of this write apart from others' edits. A
// workload deleted since it was read is no error: the next observation does
// not select it.
func (e *external) apply(ctx context.Context, cr *v1alpha1.ConfigRollout, kind, name string, u *unstructured.Unstructured) error {
	// The workload watches are on the local cluster: only there is the event
	// of this write to be told apart. An apply has no precondition, so only
	// its answer tells its event (ownwrite): an event before the answer is
	// taken Unsure, and a miss queues the rollout again (writer).
	var own *ownwrite.Filter[ownwrite.Key]
	if e.cluster.Local {
		own = e.own
	}
	done := own.Writing(client.ObjectKeyFromObject(cr), ownwrite.Key{Kind: kind, Namespace: cr.GetNamespace(), Name: name}, ownwrite.Patch())
	err := e.cluster.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager(cr)), client.ForceOwnership)
	_ = done(u.GetResourceVersion(), err)
	return resource.IgnoreNotFound(err)
}

// Delete releases the ConfigRollout's locks and leaves the hash annotations
// where they are: removing those would roll the workloads.
func (e *external) Delete(ctx context.Context, cr *v1alpha1.ConfigRollout) (managed.ExternalDelete, error) {
	held, err := lockedBy(ctx, e.cluster.Client, e.cache, cr.GetNamespace(), cr.GetName())
	if err != nil {
		return managed.ExternalDelete{}, err
	}
	release := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+AnnotationLock+`":null}}}`))
	for _, w := range held {
		o, _ := newObject(w.Kind)
		o.SetNamespace(cr.GetNamespace())
		o.SetName(w.Name)
		if err := e.cluster.Client.Patch(ctx, o, release); resource.IgnoreNotFound(err) != nil {
			return managed.ExternalDelete{}, errors.Wrapf(err, "cannot release %s %q", w.Kind, w.Name)
		}
	}
	return managed.ExternalDelete{}, nil
}

func (e *external) Disconnect(context.Context) error { return nil }
