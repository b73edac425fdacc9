package configrollout

import (
	"context"
	"fmt"
	"strings"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// runs works out the hash of the configuration a selected workload's pods
// run with, and whether that is a baseline: template is the hash its pod
// template carries, ours whether it carries this rollout's lock, rec what
// the rollout's status recorded of it (zero when nothing), want the hash it
// is to carry and all that of every source together. A workload the rollout
// starts to follow (no lock of ours, nothing recorded, a template that does
// not carry the current hash) is adopted when adopt allows: its pods are
// taken to run the current configuration, recorded as its baseline, so that
// nothing rolls it until the configuration changes. A workload the status
// records is never adopted again, lock or not (TestRunsTakesANewWorkloadsHashAsBaseline, FuzzRuns).
func runs(template string, ours bool, rec v1alpha1.RolledWorkload, want, all string, adopt bool) (carried string, baseline, adopted bool) {
	switch {
	case upToDate(template, want, all) || ours:
		// Its pod template carries the configuration it runs: the current
		// one, or the one this rollout last rolled it to.
		return template, false, false
	case rec.Baseline:
		// Followed and not rolled since: it runs its baseline.
		return rec.Hash, true, false
	case rec.Hash != "":
		// Rolled by this rollout, and its lock lost since (a replace or an
		// edit that dropped it): its template says what it runs, and the
		// next change rolls it and writes the lock again. A replace that
		// dropped the hash too restarted its pods on the configuration of
		// that moment, no older than the one recorded: it runs that one
		// (TestConfigRolloutLostLock).
		if template == "" {
			return rec.Hash, false, false
		}
		return template, false, false
	case adopt:
		return want, true, true
	}
	return template, false, false
}

// indexFollowing is the field index of ConfigRollouts by the workloads
// their status records as theirs ("Kind/name"): those they rolled (or found
// carrying a hash, which runs treats alike) and those they follow by a
// baseline (holding). Such a workload may carry no lock (a baseline's never
// did; a rolled one's was dropped by a replace): this index is how another
// rollout finds it is not to be taken (followedBy).
const indexFollowing = "configrollout.following"

// holding reports whether a rollout whose status records w holds it without
// a lock, and whether by a roll: a hash that is not a baseline is the one
// the rollout rolled it to, or found it carrying. An entry with neither
// (a workload to roll on adoption, not rolled yet) holds nothing.
func holding(w v1alpha1.RolledWorkload) (held, rolled bool) {
	return w.Baseline || w.Hash != "", w.Hash != "" && !w.Baseline
}

// followingValues are a ConfigRollout's values of indexFollowing.
func followingValues(o client.Object) []string {
	cr, ok := o.(*v1alpha1.ConfigRollout)
	if !ok {
		return nil
	}
	var out []string
	for _, w := range cr.Status.AtProvider.Workloads {
		if held, _ := holding(w); held {
			out = append(out, workloadKey(w.Kind, w.Name))
		}
	}
	return out
}

// rolledBy reports whether cr's status records workload key as rolled.
func rolledBy(cr *v1alpha1.ConfigRollout, key string) bool {
	for _, w := range cr.Status.AtProvider.Workloads {
		if workloadKey(w.Kind, w.Name) == key {
			_, rolled := holding(w)
			return rolled
		}
	}
	return false
}

// keeps reports whether rollout o, whose status records workload key,
// keeps it from cr, and cr rolled tells whether cr's status records it as
// rolled. A rolled record holds as a lock does, whatever the rollouts' ages:
// a lost lock does not let another rollout take the workload as a baseline,
// or the next change would be rolled by both. Of two records of one sort
// (two baselines, or two rolls after a race), the first rollout keeps it.
// Every pair of rollouts agrees: exactly one of them keeps the workload
// (TestKeepsAWorkloadTheRolloutRolled).
func keeps(o, cr *v1alpha1.ConfigRollout, key string, crRolled bool) bool {
	if oRolled := rolledBy(o, key); oRolled != crRolled {
		return oRolled
	}
	return first(o, cr)
}

// first reports whether a precedes b among rollouts that follow one
// workload: the older one follows it, then the one first by name.
func first(a, b *v1alpha1.ConfigRollout) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.GetName() < b.GetName()
}

// followedBy returns the rollout other than cr that holds workload key
// without a lock and keeps it from cr (keeps), or "" when cr may follow it:
// a workload follows one ConfigRollout, whether by a lock, a roll its
// status records or a baseline. crRolled says whether cr's status records
// it as rolled. r holds every rollout of the namespace (otherRollouts); a
// rollout it cannot list yet follows nothing new.
func followedBy(ctx context.Context, r client.Reader, cr *v1alpha1.ConfigRollout, key string, crRolled bool) (string, error) {
	if r == nil {
		return "", nil
	}
	l := &v1alpha1.ConfigRolloutList{}
	if err := r.List(ctx, l, client.InNamespace(cr.GetNamespace()), client.MatchingFields{indexFollowing: key}, client.UnsafeDisableDeepCopy); err != nil {
		return "", errors.Wrap(err, "cannot list the ConfigRollouts that follow "+key)
	}
	by := ""
	for i := range l.Items {
		o := &l.Items[i]
		if o.GetName() != cr.GetName() && o.GetDeletionTimestamp() == nil && keeps(o, cr, key, crRolled) && (by == "" || o.GetName() < by) {
			by = o.GetName()
		}
	}
	return by, nil
}

// watchFollowers reconciles, when a rollout that followed workloads without
// a lock is deleted, the rollouts each of those workloads concerns, as an
// event of the workload would (those that name it, select it, or read what
// it reads), so that the next in line follows it now: without a lock
// released, no workload event tells them. It costs what one event of each
// followed workload costs, not a reconcile of every rollout in the namespace.
// The deletions come from others, which holds every rollout of the cluster
// (otherRollouts): on a sharded replica, those of other shards too.
func watchFollowers(b *builder.Builder, others cache.Cache, c client.Reader, rd *readers, autos *autoRollouts) *builder.Builder {
	h := handler.Funcs{
		DeleteFunc: func(ctx context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queued := map[string]bool{e.Object.GetName(): true}
			for _, key := range followingValues(e.Object) {
				kind, name, _ := strings.Cut(key, "/")
				m := &metav1.PartialObjectMetadata{}
				m.SetGroupVersionKind(GroupVersionKind(kind))
				if err := c.Get(ctx, types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: name}, m); err != nil {
					// Gone: nothing follows it any more.
					continue
				}
				for _, r := range referencing(ctx, c, rd, autos, kind, m, watchset.Changed) {
					if !queued[r.Name] {
						queued[r.Name] = true
						q.Add(r)
					}
				}
			}
		},
	}
	deleted := predicate.Funcs{
		CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
		UpdateFunc:  func(ctrlevent.UpdateEvent) bool { return false },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
	}
	return b.WatchesRawSource(source.Kind(others, client.Object(&v1alpha1.ConfigRollout{}), handler.EventHandler(h), predicate.Predicate(deleted)))
}

// followedBy names the other ConfigRollout that workload w follows, by its
// lock or, without one, by what that rollout's status records of it (a
// roll or a baseline); "" when it may follow this one. rec is what cr's
// status records of w.
func (e *external) followedBy(ctx context.Context, cr *v1alpha1.ConfigRollout, w workload, rec v1alpha1.RolledWorkload) (string, error) {
	switch {
	case w.Lock == cr.GetName():
		return "", nil
	case w.Lock != "" && e.holds(ctx, cr.GetNamespace(), w.Lock):
		return w.Lock, nil
	}
	_, rolled := holding(rec)
	return followedBy(ctx, e.rollouts, cr, workloadKey(w.Kind, w.Name), rolled)
}

// following says in one event which workloads the rollout starts to follow
// without rolling them.
func (e *external) following(cr *v1alpha1.ConfigRollout, workloads []string) {
	if len(workloads) == 0 {
		return
	}
	names := strings.Join(workloads[:min(len(workloads), maxNamed)], ", ")
	if len(workloads) > maxNamed {
		names += ", …"
	}
	what := fmt.Sprintf("%d workloads", len(workloads))
	if len(workloads) == 1 {
		what = "1 workload"
	}
	e.record.Event(cr, event.Normal(reasonFollowing, fmt.Sprintf("Following %s without rolling: %s; a later change of the configuration rolls it", what, names)))
}

// holds reports whether ConfigRollout name in ns still exists to hold a lock.
// A deleted rollout releases its locks through the metadata cache, which may
// not have seen its last lock yet: such a lock is then free. Only on the
// provider's own cluster, where locks are found in the cache; elsewhere they
// are found on the API server and every lock holds. The rollout is looked
// for among every rollout of the namespace (otherRollouts), whichever shard
// it is on: a lock of a rollout another replica acts on holds
// (TestShardedRolloutsRollOnce).
func (e *external) holds(ctx context.Context, ns, name string) bool {
	if e.cache == nil || e.rollouts == nil {
		return true
	}
	err := e.rollouts.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1alpha1.ConfigRollout{})
	return !kerrors.IsNotFound(err)
}
