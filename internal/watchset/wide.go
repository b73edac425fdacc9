package watchset

// This file holds the strategy that adapts to how widely a resource is
// watched. Groups of one resource and one label (or of names) in many
// namespaces of a cluster form a family; while the family spans few
// namespaces each group runs narrow informers (its names' or its shared
// one), and past wideAbove namespaces one wide informer of the resource in
// every namespace serves them all, routing each event to the owners of the
// object's namespace and value as before. Below half of wideAbove the family
// runs narrow informers again.
//
// A switch loses no event and costs no write: the new informers start while
// the old ones keep serving, and the old ones stop only once every new one
// has synced. An object the new informers list at the version an old one
// already told its owners of enqueues nobody (told); an object an old
// informer holds that the new ones do not, deleted in between, enqueues its
// owners when the old one stops (lost). TestStrategySwitchLosesNoEvent holds
// both; owners are reconciled for changes only.

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/clusterops/provider-clusterops/internal/target"
)

// wideAbove is how many namespaces a family of groups may span with narrow
// informers; one more and a wide informer serves it. A narrow informer costs
// an API-server watch, six goroutines and a list of its namespace; a wide one
// costs the same once, plus the identities of objects in namespaces nobody
// watches and their events, dropped by a map lookup. 64 namespaces' narrow
// informers are 64 watches and 384 goroutines, about 3 MiB of stacks; past
// that, the wide one is cheaper unless the cluster holds far more objects of
// the resource than its watched namespaces do.
const wideAbove = 64

// A family is the groups of one resource and label (or of names) on one
// cluster, one group a namespace.
type family struct {
	cluster  string
	resource schema.GroupVersionResource
	label    string
}

// family returns the family of g; false for a group of every namespace,
// whose shared informer is wide already.
func (g group) family() (family, bool) {
	if g.namespace == "" {
		return family{}, false
	}
	return family{cluster: g.cluster, resource: g.resource, label: g.label}, true
}

// group returns the group of f in namespace ns.
func (f family) group(ns string) group {
	return group{cluster: f.cluster, resource: f.resource, namespace: ns, label: f.label}
}

// place places the objects of f's wide informer: in the group of their
// namespace.
func (f family) place(o any) (group, string, bool) {
	m, err := meta.Accessor(o)
	if err != nil {
		return group{}, "", false
	}
	g := f.group(m.GetNamespace())
	v, ok := g.value(o)
	return g, v, ok
}

// watch is the wide watch of f: the resource in every namespace, or the
// objects of it that carry f's label.
func (f family) watch() Watch {
	return Watch{Resource: f.resource, Labels: f.label}
}

// A strategy is how a family is watched.
type strategy int

const (
	// narrow: informers of each group's namespace.
	narrow strategy = iota
	// wide: one informer of every namespace.
	wide
)

// strategyFor returns how to watch a family that spans namespaces, watched
// now as now: wide past above, narrow below half of it, as now between, so
// that a family at the threshold does not switch back and forth.
func strategyFor(now strategy, namespaces, above int) strategy {
	switch {
	case namespaces > above:
		return wide
	case namespaces < above/2:
		return narrow
	default:
		return now
	}
}

// A wideWatch is a family's wide informer. While it is leaving the family's
// narrow informers start, and it serves until they have all synced.
type wideWatch struct {
	*running
	cluster *target.Cluster
	leaving bool
}

// wideOf returns the wide informer of k's family; nil if none.
func (s *Set) wideOf(g group) *wideWatch {
	if f, ok := g.family(); ok {
		return s.wide[f]
	}
	return nil
}

// widen starts the wide informer of each family that the new groups of
// fresh take past wideAbove namespaces, and returns those families; s.mu is
// held. The family's narrow informers serve until it has synced (widened).
func (s *Set) widen(clusters map[string]*target.Cluster, fresh map[group][]key) ([]family, error) {
	more := map[family]int{}
	for g := range fresh {
		if f, ok := g.family(); ok && len(s.values[g]) == 0 {
			more[f]++
		}
	}
	var started []family
	for f, n := range more {
		if _, ok := s.wide[f]; ok || strategyFor(narrow, len(s.spaces[f])+n, s.wideAbove) != wide {
			continue
		}
		if err := s.startWide(clusters[f.cluster], f); err != nil {
			s.unwiden(started)
			return nil, err
		}
		started = append(started, f)
	}
	return started, nil
}

// unwiden stops the wide informers of fs, which serve no owner yet; s.mu is
// held.
func (s *Set) unwiden(fs []family) {
	for _, f := range fs {
		s.wide[f].stop()
		delete(s.wide, f)
	}
}

// startWide runs the wide informer of f on cluster c; s.mu is held.
func (s *Set) startWide(c *target.Cluster, f family) error {
	r, err := s.inform(c, f.watch(), func(r *running, h Happening, objs ...any) { s.route(r, f.place, h, objs...) })
	if err != nil {
		return err
	}
	r.onSync = func() []notice { return s.widened(f, r) }
	s.wide[f] = &wideWatch{running: r, cluster: c}
	return nil
}

// widened stops the narrow informers of f once its wide informer r has
// synced, and returns notices for what they held that r does not; s.mu is
// held.
func (s *Set) widened(f family, r *running) []notice {
	w := s.wide[f]
	if w == nil || w.running != r || w.leaving {
		return nil
	}
	to := func(key) (*running, bool) { return r, true }
	var out []notice
	for ns := range s.spaces[f] {
		g := f.group(ns)
		if sr, ok := s.coalesced[g]; ok {
			out = append(out, s.lost(sr, within(g), to)...)
			sr.stop()
			delete(s.coalesced, g)
		}
		for name := range s.named[g] {
			k := g.watch(name)
			out = append(out, s.lost(s.watches[k], fixed(g, name), to)...)
			s.stopWatch(k)
		}
	}
	s.adapt(f)
	return out
}

// adapt narrows family f again once it spans few enough namespaces, and
// stops its wide informer with its last group; s.mu is held. A family
// switching already finishes first.
func (s *Set) adapt(f family) {
	w, ok := s.wide[f]
	if !ok {
		return
	}
	if len(s.spaces[f]) == 0 {
		w.stop()
		delete(s.wide, f)
		return
	}
	if w.leaving || !w.synced || strategyFor(wide, len(s.spaces[f]), s.wideAbove) == wide {
		return
	}
	if err := s.narrowAgain(f, w); err != nil {
		// The wide informer serves on; the next owner to let go tries again.
		s.log.Debug("Cannot watch narrowly again", "resource", f.resource.String(), "label", f.label, "error", err)
	}
}

// narrowAgain starts the narrow informers of every group of f, all or
// nothing, while w serves on until they have synced (landed); s.mu is held.
func (s *Set) narrowAgain(f family, w *wideWatch) error {
	var started []key
	var shared []group
	undo := func() {
		for _, k := range started {
			s.stopWatch(k)
		}
		for _, g := range shared {
			s.coalesced[g].stop()
			delete(s.coalesced, g)
		}
	}
	for ns := range s.spaces[f] {
		g := f.group(ns)
		if len(s.values[g]) > s.coalesceAbove {
			if err := s.startCoalesced(w.cluster, g); err != nil {
				undo()
				return err
			}
			shared = append(shared, g)
			continue
		}
		for v := range s.values[g] {
			if err := s.start(w.cluster, g.watch(v)); err != nil {
				undo()
				return err
			}
			started = append(started, g.watch(v))
		}
	}
	w.leaving = true
	return nil
}

// joinFamily has narrow informer r of group g complete its family's return
// to narrow informers when it is the last of them to sync; s.mu is held.
func (s *Set) joinFamily(g group, r *running) {
	if f, ok := g.family(); ok {
		r.onSync = func() []notice { return s.landed(f) }
	}
}

// landed stops the leaving wide informer of f once every narrow informer of
// f has synced, and returns notices for what it held that they do not; s.mu
// is held.
func (s *Set) landed(f family) []notice {
	w := s.wide[f]
	if w == nil || !w.leaving {
		return nil
	}
	for ns := range s.spaces[f] {
		g := f.group(ns)
		for v := range s.values[g] {
			if r, ok := s.narrowServing(g.watch(v)); !ok || !r.synced {
				return nil
			}
		}
	}
	out := s.lost(w.running, f.place, s.narrowServing)
	w.stop()
	delete(s.wide, f)
	return out
}

// lost returns notices for the owners of each object that informer from
// holds and the informer that serves its watch instead (to) does not hold
// at the same value: a deletion, or a change of the routing label, in
// between, whose event from never handed out. s.mu is held.
func (s *Set) lost(from *running, place placer, to func(key) (*running, bool)) []notice {
	var out []notice
	for _, o := range from.store.List() {
		g, v, ok := place(o)
		owners := s.values[g][v]
		if !ok || owners.len() == 0 {
			continue
		}
		k := g.watch(v)
		r, ok := to(k)
		if !ok {
			continue
		}
		if held, exists, _ := r.store.Get(o); exists {
			if hg, hv, placed := place(held); placed && hg == g && hv == v {
				continue
			}
		}
		out = append(out, s.concerned(nil, owners, k, Gone, []any{o})...)
	}
	return out
}

// told reports whether the object informer r lists was told at the version
// it shows to the owners of value v in group g by another informer that
// serves them while g's family switches: one that has synced and holds it
// so, as a lean informer's store holds only what it handed out. s.mu is held.
func (s *Set) told(r *running, g group, v string, o *Object) bool {
	w := s.wideOf(g)
	if w == nil {
		return false
	}
	other, ok := w.running, true
	if r == w.running {
		other, ok = s.narrowServing(g.watch(v))
	}
	if !ok || other == r || !other.synced {
		return false
	}
	held, exists, _ := other.store.Get(o)
	m, isObject := asObject(held)
	return exists && isObject && m.ResourceVersion == o.ResourceVersion
}

// Informers returns how many informers s runs, each one API-server watch:
// narrow ones (a watch's own, a group's shared) and wide ones, one a family.
func (s *Set) Informers() (narrow, wide int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watches) + len(s.coalesced), len(s.wide)
}
