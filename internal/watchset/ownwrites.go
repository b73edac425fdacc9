package watchset

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/internal/target"
)

// maxOwnWrites bounds the own writes the Set remembers. One whose event never
// comes (the object was gone first, or a relist skipped that version) stays
// until the object is written again; past this many they are all forgotten,
// which costs at most one reconcile each.
const maxOwnWrites = 100_000

// object names one object on one cluster.
type object struct {
	cluster         string
	resource        schema.GroupVersionResource
	namespace, name string
}

// ownWrite is a write an owner makes to an object: from version before, or
// a create when before is empty.
type ownWrite struct {
	owner  types.NamespacedName
	before string
}

// Writing records that owner is about to write the named object of resource
// on cluster c, now at version before ("" to create it), and returns what to
// call with the write's error. The write's event does not enqueue owner,
// which knows what it wrote: a rule creating 1,000 copies is not reconciled
// again for each. It is still every other owner's event, and any later change
// is owner's again.
//
// Recorded before the write, since the write's event may come before its
// response. An event that matches is owner's own write even if somebody
// else's raced it: only one create, and only one update from a version, can
// succeed, and owner's failed write is an error it retries on.
func (s *Set) Writing(owner types.NamespacedName, c *target.Cluster, resource schema.GroupVersionResource, namespace, name, before string) func(error) {
	o := object{cluster: c.ID, resource: resource, namespace: namespace, name: name}
	s.mu.Lock()
	if len(s.ownWrites) >= maxOwnWrites {
		clear(s.ownWrites)
		clear(s.writesBy)
	}
	s.ownWrites[o] = ownWrite{owner: owner, before: before}
	if s.writesBy[owner] == nil {
		s.writesBy[owner] = map[object]struct{}{}
	}
	s.writesBy[owner][o] = struct{}{}
	s.mu.Unlock()
	return func(err error) {
		if err == nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if w, ok := s.ownWrites[o]; ok && w.owner == owner && w.before == before {
			s.dropWrite(o)
		}
	}
}

// dropWrite forgets the own write of o; s.mu is held.
func (s *Set) dropWrite(o object) {
	w, ok := s.ownWrites[o]
	if !ok {
		return
	}
	delete(s.ownWrites, o)
	if m := s.writesBy[w.owner]; m != nil {
		delete(m, o)
		if len(m) == 0 {
			delete(s.writesBy, w.owner)
		}
	}
}

// forgetWrites forgets owner's own writes whose events never came: the owner
// is gone. s.mu is held.
func (s *Set) forgetWrites(owner types.NamespacedName) {
	for o := range s.writesBy[owner] {
		if w, ok := s.ownWrites[o]; ok && w.owner == owner {
			delete(s.ownWrites, o)
		}
	}
	delete(s.writesBy, owner)
}

// isOwnWrite reports whether an event of watch k about objs is owner's own
// write: a create it was making, or an update from the version it wrote
// from. The write is then forgotten, so that the object's next event,
// whoever causes it, is owner's again. s.mu is held.
func (s *Set) isOwnWrite(owner types.NamespacedName, k key, objs []any) bool {
	if len(s.ownWrites) == 0 || len(objs) == 0 || len(objs) > 2 {
		return false
	}
	last, ok := asObject(objs[len(objs)-1])
	if !ok {
		return false
	}
	o := object{cluster: k.cluster, resource: k.Resource, namespace: last.Namespace, name: last.Name}
	w, ok := s.ownWrites[o]
	if !ok || w.owner != owner {
		return false
	}
	from := ""
	if len(objs) == 2 {
		was, ok := asObject(objs[0])
		if !ok {
			return false
		}
		from = was.ResourceVersion
	}
	if from != w.before {
		return false
	}
	s.dropWrite(o)
	return true
}

// forgetWrite forgets any own write of the object o, which watch k saw
// deleted: a deletion is nobody's own write.
func (s *Set) forgetWrite(k key, o any) {
	m, ok := asObject(o)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropWrite(object{cluster: k.cluster, resource: k.Resource, namespace: m.Namespace, name: m.Name})
}
