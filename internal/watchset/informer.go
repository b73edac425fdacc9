package watchset

// This file holds the informers behind the watches: starting and stopping
// the metadata-only informer of a watch (inform, start, stopWatch), and what
// a running one offers its owners: whether it has synced (WhenSynced) and
// the objects its store holds (List), read instead of the API server.

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/target"
)

type running struct {
	stop context.CancelFunc
	// store holds what the informer's events delivered, no more: its
	// handler runs as the store changes (lean.go).
	store toolscache.Indexer
	ctl   toolscache.Controller
	// owners are those of a watch of no group; a group's owners are the
	// Set's (values), whichever informer serves them.
	owners *ownerSet
	// synced is set once the informer has listed and handed out the list's
	// events (or stopped before). Under Set.mu it stands for the
	// controller's HasSynced, which takes the lock its handler holds while
	// waiting for Set.mu (TestWatchsetWidensAndNarrows deadlocked on it).
	// waiting are the owners to enqueue then (WhenSynced), and onSync
	// completes a switch of strategy the informer ends (wide.go). All under
	// Set.mu.
	synced  bool
	waiting map[types.NamespacedName]struct{}
	onSync  func() []notice
}

// waits reports whether owner waits for r to sync (WhenSynced); Set.mu is
// held. A nil r has no owner waiting.
func (r *running) waits(owner types.NamespacedName) bool {
	if r == nil {
		return false
	}
	_, ok := r.waiting[owner]
	return ok
}

// notifier hands the events of informer r to the owners they concern.
type notifier func(r *running, h Happening, objs ...any)

// start runs the informer of k alone; s.mu is held.
func (s *Set) start(c *target.Cluster, k key) error {
	notify := func(_ *running, h Happening, objs ...any) { s.notify(k, h, objs...) }
	g, name, named := k.named()
	if named {
		notify = func(r *running, h Happening, objs ...any) { s.route(r, fixed(g, name), h, objs...) }
	}
	r, err := s.inform(c, k.Watch, notify)
	if err != nil {
		return err
	}
	s.watches[k] = r
	if !named {
		r.owners = &ownerSet{}
		return nil
	}
	s.joinFamily(g, r)
	if s.named[g] == nil {
		s.named[g] = map[string]struct{}{}
	}
	s.named[g][name] = struct{}{}
	return nil
}

// stopWatch stops the informer of k alone; s.mu is held.
func (s *Set) stopWatch(k key) {
	s.watches[k].stop()
	delete(s.watches, k)
	if g, name, ok := k.named(); ok {
		delete(s.named[g], name)
		if len(s.named[g]) == 0 {
			delete(s.named, g)
		}
	}
}

// client returns the metadata client of cluster c; s.mu is held.
func (s *Set) client(c *target.Cluster) (metadata.Interface, error) {
	if mc, ok := s.clients[c.ID]; ok {
		return mc, nil
	}
	cfg := rest.CopyConfig(c.Config)
	// Watches are long-lived: their requests are few, but many start at once
	// when the provider starts, so they get a rate of their own.
	cfg.QPS, cfg.Burst = 50, 100
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create a metadata client for watches")
	}
	s.clients[c.ID] = mc
	return mc, nil
}

// inform runs an informer of w on cluster c whose events go to notify; s.mu
// is held.
func (s *Set) inform(c *target.Cluster, w Watch, notify notifier) (*running, error) {
	mc, err := s.client(c)
	if err != nil {
		return nil, err
	}
	indexers := toolscache.Indexers{}
	// A watch's events are all anyone uses: its store keeps only what the
	// informer needs to tell objects and versions apart, not labels,
	// annotations or managed fields (BenchmarkMemory holds it).
	transform := slim
	switch {
	case w.ReadLabels:
		transform = slimKeepingLabels
	case isKey(w.Labels):
		// A label group's coalesced watch: the label's value routes events.
		transform = slimKeeping(w.Labels)
		indexers[byValue] = func(o any) ([]string, error) {
			m, err := meta.Accessor(o)
			if err != nil {
				return nil, err
			}
			v := m.GetLabels()[w.Labels]
			return []string{valueIn(m.GetNamespace(), v), valueIn("", v)}, nil
		}
	}
	r := &running{}
	r.store, r.ctl = lean(mc, w, indexers, transform, s.handler(c.ID, w, func(h Happening, objs ...any) { notify(r, h, objs...) }),
		func(_ context.Context, _ *toolscache.Reflector, err error) {
			// The informer retries with backoff; the managed resource's poll is
			// the safety net meanwhile.
			s.log.Debug("Watch failed; retrying", "resource", w.Resource.String(), "namespace", w.Namespace, "labels", w.Labels, "fields", w.Fields, "error", err)
		})
	ctx, stop := context.WithCancel(s.ctx)
	if s.startHook != nil {
		if err := s.startHook(ctx, w); err != nil {
			stop()
			return nil, err
		}
	}
	r.stop = stop
	go r.ctl.RunWithContext(ctx)
	go s.awaitSync(ctx, r)
	return r, nil
}

// handler turns the informer events of watch w on cluster id into notify's.
func (s *Set) handler(id string, w Watch, notify func(h Happening, objs ...any)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			h := Changed
			if initial {
				h = Listed
			}
			notify(h, o)
		},
		UpdateFunc: func(was, is any) {
			// Without a resync period, an update at the version already held
			// is a relist (after a watch history was compacted away, or the
			// API server restarted) delivering what did not change: no owner
			// has anything to do, and at fleet size every owner of a coalesced
			// watch would be reconciled for it.
			if sameVersion(was, is) {
				return
			}
			// A watch that keeps labels is read for them: an update that
			// changes neither them nor the deletion mark, such as a terminating
			// namespace's status, concerns no owner. Every owner of the
			// namespaces watch would be reconciled for it.
			if w.ReadLabels && sameLabelsAndDeletion(was, is) {
				return
			}
			notify(Changed, was, is)
		},
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			// A deletion is nobody's own write: the copy a rule made and
			// somebody deleted must be made again.
			s.forgetWrite(key{cluster: id, Watch: w}, o)
			notify(Gone, o)
		},
	}
}

// awaitSync enqueues the owners waiting for r to sync once it has, or once
// it stopped before: they decide again either way. Synced is when the first
// list's events have been handed out, so those come first. The goroutine
// lasts until the informer's first list.
func (s *Set) awaitSync(ctx context.Context, r *running) {
	select {
	case <-ctx.Done():
	case <-r.ctl.HasSyncedChecker().Done():
	}
	s.mu.Lock()
	r.synced = true
	// An owner waiting for more watches than r is enqueued by the last of
	// them, not once by each: a rule resuming after a start waits for
	// three or so.
	owners := make([]types.NamespacedName, 0, len(r.waiting))
	for o := range r.waiting {
		if !s.waitsOnOther(o, r) {
			owners = append(owners, o)
		}
	}
	r.waiting = nil
	var notices []notice
	if r.onSync != nil {
		notices = r.onSync()
	}
	s.mu.Unlock()
	s.send(notices)
	s.enqueue(owners, true)
}

// waitsOnOther is whether owner waits for a watch of its own but r to sync
// (WhenSynced); s.mu is held. Each such watch enqueues owner when it syncs
// or stops.
func (s *Set) waitsOnOther(owner types.NamespacedName, r *running) bool {
	for h := range s.owners[owner] {
		o, ok := s.serving(h.Value())
		if !ok || o == r || o.synced {
			continue
		}
		if _, waits := o.waiting[owner]; waits {
			return true
		}
	}
	return false
}

// WhenSynced reports whether every watch of owner has synced, so that List
// serves them all. If not, owner is enqueued, as routine, once they have: an
// owner that would rather decide from its watches than read the API server
// (such as a resource whose status says what it last decided from, after a
// restart) waits for them without holding a worker.
func (s *Set) WhenSynced(owner types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := true
	for h := range s.owners[owner] {
		r, ok := s.serving(h.Value())
		if !ok {
			// Never so once ensure returns; never wait on it either.
			go s.enqueue([]types.NamespacedName{owner}, true)
			return false
		}
		if r.synced {
			continue
		}
		all = false
		if r.waiting == nil {
			r.waiting = map[types.NamespacedName]struct{}{}
		}
		r.waiting[owner] = struct{}{}
	}
	return all
}

// List returns the objects a running, synced watch w on cluster c holds, as
// its transform kept them; false when there is no such watch yet, and the
// caller reads the API server instead. The store is current up to the events
// the watch has delivered, which are the events that enqueue its owners. A
// name watch served by its group's coalesced informer, or its resource's wide
// one, lists its one object.
func (s *Set) List(c *target.Cluster, w Watch) ([]*Object, bool) {
	k := key{cluster: c.ID, Watch: w}
	s.mu.Lock()
	r, ok := s.serving(k)
	own := ok && s.watches[k] == r
	s.mu.Unlock()
	if !ok || !r.ctl.HasSynced() {
		return nil, false
	}
	var items []any
	if g, v, named := k.named(); named && !own {
		if g.label != "" {
			items, _ = r.store.ByIndex(byValue, valueIn(w.Namespace, v))
		} else if i, exists, _ := r.store.GetByKey(toolscache.NewObjectName(w.Namespace, v).String()); exists {
			items = []any{i}
		}
	} else {
		items = r.store.List()
	}
	out := make([]*Object, 0, len(items))
	for _, i := range items {
		// A wide informer's store holds every namespace.
		if m, ok := asObject(i); ok && (w.Namespace == "" || m.Namespace == w.Namespace) {
			out = append(out, m)
		}
	}
	return out, true
}
