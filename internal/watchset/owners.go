package watchset

// This file holds which watches each owner holds: Ensure, EnsureOn and Join
// set them, Owns asks, Forget drops them all. An informer starts when the
// first owner needs its watch and stops when the last lets go (own,
// release), and a change of an owner's watches is all or nothing, so that no
// informer runs unowned and no owner holds a watch nothing serves.

import (
	"unique"

	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/internal/target"
)

// Ensure makes ws the complete set of watches owner needs on cluster c: missing
// ones start, ones that owner alone needed and no longer names stop. It is all
// or nothing: if a watch cannot start, the ones this call started stop and
// owner keeps the watches it had.
func (s *Set) Ensure(owner types.NamespacedName, c *target.Cluster, ws ...Watch) error {
	return s.EnsureOn(owner, On{Cluster: c, Watches: ws})
}

// On are watches on one cluster.
type On struct {
	Cluster *target.Cluster
	Watches []Watch
}

// EnsureOn is Ensure for an owner that acts on more than one cluster, such as
// a rule that reads on one and writes on another: ons are the complete set of
// watches owner needs, on every cluster.
func (s *Set) EnsureOn(owner types.NamespacedName, ons ...On) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ensure(owner, ons, false)
}

// Join adds watches ws on cluster c to owner's, keeping the others. An owner
// joins the watches it reads from before it reads: an event between its read
// and its joining a watch that already runs would reach it never.
func (s *Set) Join(owner types.NamespacedName, c *target.Cluster, ws ...Watch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ensure(owner, []On{{Cluster: c, Watches: ws}}, true)
}

// ensure makes ons owner's watches, or adds them to owner's (keep); s.mu is
// held.
func (s *Set) ensure(owner types.NamespacedName, ons []On, keep bool) error {
	want := map[key]struct{}{}
	clusters := map[string]*target.Cluster{}
	for _, on := range ons {
		clusters[on.Cluster.ID] = on.Cluster
		for _, w := range on.Watches {
			want[key{cluster: on.Cluster.ID, Watch: w}] = struct{}{}
		}
	}
	if keep {
		// Owned keys are served already: none needs its cluster to start.
		for h := range s.owners[owner] {
			want[h.Value()] = struct{}{}
		}
	}
	// Start first and release after: a failed start must leave no informer
	// running unowned, and no key in s.owners without its watch.
	var started []key
	var coalesced []group
	var widened []family
	undo := func() {
		for _, k := range started {
			s.stopWatch(k)
		}
		for _, g := range coalesced {
			s.coalesced[g].stop()
			delete(s.coalesced, g)
		}
		s.unwiden(widened)
	}
	fresh := map[group][]key{}
	for k := range want {
		if s.served(k) {
			continue
		}
		if g, _, ok := k.named(); ok {
			fresh[g] = append(fresh[g], k)
			continue
		}
		if err := s.start(clusters[k.cluster], k); err != nil {
			undo()
			return err
		}
		started = append(started, k)
	}
	widened, err := s.widen(clusters, fresh)
	if err != nil {
		undo()
		return err
	}
	for g, ks := range fresh {
		if w := s.wideOf(g); w != nil && !w.leaving {
			continue
		}
		// Counted before owner lets go of any name: coalescing a little early
		// costs nothing but the namespace's other objects in the store.
		if len(s.named[g])+len(ks) > s.coalesceAbove || s.crowded(owner.Namespace, g) {
			if err := s.startCoalesced(clusters[g.cluster], g); err != nil {
				undo()
				return err
			}
			coalesced = append(coalesced, g)
			continue
		}
		for _, k := range ks {
			if err := s.start(clusters[k.cluster], k); err != nil {
				undo()
				return err
			}
			started = append(started, k)
		}
	}
	// Nothing fails from here. The coalesced informers started, and only then do
	// the watches they replace stop.
	for _, g := range coalesced {
		s.coalesce(g)
	}
	s.hand(owner, want)
	return nil
}

// hand makes owner the owner of exactly the watches want, every one of which
// is served, and reconciles it when it joined a watch that had already seen
// a change it missed. Owning before releasing leaves no informer ownerless in
// between, which release would stop.
func (s *Set) hand(owner types.NamespacedName, want map[key]struct{}) {
	var behind bool
	owned := make(map[unique.Handle[key]]struct{}, len(want))
	for k := range want {
		h := unique.Make(k)
		if _, had := s.owners[owner][h]; !had {
			behind = behind || s.missed(owner, k)
		}
		s.own(owner, k)
		owned[h] = struct{}{}
	}
	for h := range s.owners[owner] {
		if _, ok := owned[h]; !ok {
			s.release(owner, h.Value())
		}
	}
	if behind {
		// Not from here: the channel may be full, and s.mu is held.
		go s.enqueue([]types.NamespacedName{owner}, false)
	}
	if len(want) == 0 {
		delete(s.owners, owner)
		return
	}
	s.owners[owner] = owned
}

// Owns reports whether owner holds watch w on cluster c: whether an event of
// w reaches it from now on.
func (s *Set) Owns(owner types.NamespacedName, c *target.Cluster, w Watch) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.owners[owner][unique.Make(key{cluster: c.ID, Watch: w})]
	return ok
}

// own records that owner needs k, which is served; s.mu is held.
func (s *Set) own(owner types.NamespacedName, k key) {
	g, v, ok := k.named()
	if !ok {
		s.watches[k].owners.add(owner)
		return
	}
	vs := s.values[g]
	if vs == nil {
		vs = map[string]*ownerSet{}
		s.values[g] = vs
		if f, ok := g.family(); ok {
			if s.spaces[f] == nil {
				s.spaces[f] = map[string]struct{}{}
			}
			s.spaces[f][g.namespace] = struct{}{}
		}
	}
	if vs[v] == nil {
		vs[v] = &ownerSet{}
	}
	vs[v].add(owner)
}

// serving returns the informer that serves k: while k's family switches
// strategy, the old one until the new one has synced; s.mu is held.
func (s *Set) serving(k key) (*running, bool) {
	n, ok := s.narrowServing(k)
	g, _, _ := k.named()
	w := s.wideOf(g)
	switch {
	case w == nil:
		return n, ok
	case !ok, w.leaving && !n.synced, !w.leaving && w.synced:
		return w.running, true
	default:
		return n, true
	}
}

// narrowServing returns the narrow informer that serves k: its group's
// coalesced one or its own; s.mu is held.
func (s *Set) narrowServing(k key) (*running, bool) {
	if g, _, ok := k.named(); ok {
		if r, ok := s.coalesced[g]; ok {
			return r, true
		}
	}
	r, ok := s.watches[k]
	return r, ok
}

// served reports whether an informer serves k from now on: a narrow one, or
// its family's wide one that is not leaving; s.mu is held.
func (s *Set) served(k key) bool {
	if _, ok := s.narrowServing(k); ok {
		return true
	}
	g, _, ok := k.named()
	w := s.wideOf(g)
	return ok && w != nil && !w.leaving
}

// Forget stops every watch that only owner needed and forgets its own
// writes: the managed resource is gone.
func (s *Set) Forget(owner types.NamespacedName) {
	s.mu.Lock()
	delete(s.interest, owner)
	for h := range s.owners[owner] {
		s.release(owner, h.Value())
	}
	delete(s.owners, owner)
	s.writes.ForgetOwner(owner)
	delete(s.reads, owner)
	fs := s.forgotten
	s.mu.Unlock()
	for _, f := range fs {
		f(owner)
	}
}

// OnForget has f called with every owner Forget forgets, for what a
// controller keeps of its managed resources beside their watches. Call it
// before the Set starts.
func (s *Set) OnForget(f func(types.NamespacedName)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgotten = append(s.forgotten, f)
}

// release records that owner no longer needs k and stops the informer that
// served k if nobody else needs it; s.mu is held.
func (s *Set) release(owner types.NamespacedName, k key) {
	g, v, ok := k.named()
	if !ok {
		r, ok := s.watches[k]
		if !ok {
			return
		}
		r.owners.del(owner)
		if r.owners.len() == 0 {
			s.stopWatch(k)
		}
		return
	}
	vs := s.values[g]
	vs[v].del(owner)
	if vs[v].len() > 0 {
		return
	}
	delete(vs, v)
	if _, ok := s.watches[k]; ok {
		s.stopWatch(k)
	}
	if len(vs) > 0 {
		return
	}
	delete(s.values, g)
	if r, ok := s.coalesced[g]; ok {
		r.stop()
		delete(s.coalesced, g)
	}
	if f, ok := g.family(); ok {
		delete(s.spaces[f], g.namespace)
		if len(s.spaces[f]) == 0 {
			delete(s.spaces, f)
		}
		s.adapt(f)
	}
}
