package watchset

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
)

// Peers counts a controller's managed resources in each namespace, as an
// event handler of their informer. A Set that knows a namespace holds more
// resources than a few name watches' worth starts the namespace's coalesced
// watch at once rather than a name watch for each of the first few: a restart
// of 10,000 resources over 1,000 namespaces would otherwise start and stop
// 4,000 name watches, two requests each, on its way to the 1,000 it keeps.
type Peers struct {
	mu sync.Mutex
	n  map[string]int
}

// NewPeers returns Peers that count nothing yet.
func NewPeers() *Peers {
	return &Peers{n: map[string]int{}}
}

// In returns how many resources namespace ns holds.
func (p *Peers) In(ns string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[ns]
}

// OnAdd counts o.
func (p *Peers) OnAdd(o any, _ bool) { p.count(o, 1) }

// OnUpdate counts nothing: a resource's namespace never changes.
func (p *Peers) OnUpdate(_, _ any) {}

// OnDelete uncounts o.
func (p *Peers) OnDelete(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p.count(o, -1)
}

func (p *Peers) count(o any, by int) {
	m, err := meta.Accessor(o)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[m.GetNamespace()] += by
	if p.n[m.GetNamespace()] <= 0 {
		delete(p.n, m.GetNamespace())
	}
}

// CountPeers has s start a group's coalesced watch at once, rather than its
// first name watches, for an owner whose namespace p counts more resources
// in than s runs name watches of a group, when the group is of that same
// namespace: such an owner's peers are likely to name objects there too.
// Coalescing early costs the namespace's other objects' identities in the
// store, as it does when names outnumber the few. Call it before s starts.
func (s *Set) CountPeers(p *Peers) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peers = p
}

// crowded reports whether owner's peers make group g worth sharing at once;
// s.mu is held.
func (s *Set) crowded(owner string, g group) bool {
	return s.peers != nil && g.label == "" && g.namespace == owner && s.peers.In(owner) > s.coalesceAbove
}
