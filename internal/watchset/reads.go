package watchset

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/internal/target"
)

// A Happening is what a watch event tells of an object. The narrow watches
// of this package and ConfigRollout's workload watch both rank by it: a
// Changed object is a change, reconciled at once; a Listed one is routine.
type Happening int

const (
	// Changed: created or updated while the watch ran.
	Changed Happening = iota
	// Listed: there when the watch started (its initial list).
	Listed
	// Gone: deleted.
	Gone
)

// Read records that owner read the named object of resource on cluster c at
// version rv, and acts on what it read. An event that shows the object at
// that version tells owner nothing new and does not enqueue it; a deletion
// always does. A watch a reconcile starts lists the objects that reconcile
// has just read: without this, every new watch would reconcile its owner a
// second time for nothing, most of all in a fleet spread over many
// namespaces, where each namespace's first watches are new
// (TestReadObjectsDoNotEnqueueTheirReader).
//
// An owner's reads are kept until it reads the object again or is forgotten:
// one version per object it reads, so an owner should record only what it
// reads of few objects, such as its sources.
func (s *Set) Read(owner types.NamespacedName, c *target.Cluster, resource schema.GroupVersionResource, namespace, name, rv string) {
	if rv == "" {
		return
	}
	o := object{cluster: c.ID, resource: resource, namespace: namespace, name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.reads[owner]
	for i := range rs {
		if rs[i].object == o {
			rs[i].version = rv
			return
		}
	}
	s.reads[owner] = append(rs, read{object: o, version: rv})
}

// read is the version an owner read an object at. An owner's reads are a
// slice, not a map: most read one or two objects, and a map's smallest table
// holds eight, about 1 KiB a resource in a fleet.
type read struct {
	object
	version string
}

// A readState is how an owner read the object of an event.
type readState int

const (
	// notRead: the owner has no read of it.
	notRead readState = iota
	// readAsIs: the owner read it at the version the event shows.
	readAsIs
	// readBefore: the owner read it at another version.
	readBefore
)

// readOf tells how owner read the object of an event of watch k about objs,
// against the version the event shows it at; s.mu is held.
func (s *Set) readOf(owner types.NamespacedName, k key, objs []any) readState {
	rs := s.reads[owner]
	if len(rs) == 0 || len(objs) == 0 {
		return notRead
	}
	last, ok := asObject(objs[len(objs)-1])
	if !ok {
		return notRead
	}
	o := object{cluster: k.cluster, resource: k.Resource, namespace: last.Namespace, name: last.Name}
	for _, r := range rs {
		if r.object == o {
			if r.version == last.ResourceVersion {
				return readAsIs
			}
			return readBefore
		}
	}
	return notRead
}
