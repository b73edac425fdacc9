package watchset

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/internal/ownwrite"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// object names one object on one cluster: what own writes are remembered by.
type object struct {
	cluster         string
	resource        schema.GroupVersionResource
	namespace, name string
}

// Writing records that owner is about to write the named object of resource
// on cluster c, now at version before, which the write carries as its
// precondition ("" to create it), and returns what to call with the write's
// outcome: the version the API server answered with, or the write's error.
// The write's event does not enqueue owner, which knows what it wrote: a rule
// creating 1,000 copies is not reconciled again for each. It is still every
// other owner's event, and any later change is owner's again. An event taken
// for the write's own that its answer shows was somebody else's enqueues
// owner when the answer comes (package ownwrite).
func (s *Set) Writing(owner types.NamespacedName, c *target.Cluster, resource schema.GroupVersionResource, namespace, name, before string) func(answer string, err error) {
	w := ownwrite.Create()
	if before != "" {
		w = ownwrite.Update(before)
	}
	done := s.writes.Writing(owner, object{cluster: c.ID, resource: resource, namespace: namespace, name: name}, w)
	return func(answer string, err error) {
		if done(answer, err) {
			s.enqueue([]types.NamespacedName{owner}, false)
		}
	}
}

// isOwnWrite reports whether an event of watch k about objs is owner's own
// write, which is then forgotten, so that the object's next event, whoever
// causes it, is owner's again.
func (s *Set) isOwnWrite(owner types.NamespacedName, k key, objs []any) bool {
	if len(objs) == 0 || len(objs) > 2 || s.writes.Len() == 0 {
		return false
	}
	last, ok := asObject(objs[len(objs)-1])
	if !ok {
		return false
	}
	e := ownwrite.Event{New: last.ResourceVersion}
	if len(objs) == 2 {
		was, ok := asObject(objs[0])
		if !ok {
			return false
		}
		e.Old = was.ResourceVersion
	}
	return s.writes.Own(owner, object{cluster: k.cluster, resource: k.Resource, namespace: last.Namespace, name: last.Name}, e)
}

// forgetWrite forgets any own write of the object o, which watch k saw
// deleted: a deletion is nobody's own write.
func (s *Set) forgetWrite(k key, o any) {
	if m, ok := asObject(o); ok {
		s.writes.Forget(object{cluster: k.cluster, resource: k.Resource, namespace: m.Namespace, name: m.Name})
	}
}
