package watchset

// This file holds what an owner missed by joining a watch late: a name watch
// that has listed already lists no more, so its store and the owner's reads
// (reads.go) tell whether the owner's object changed before it joined.

import (
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// missed reports whether owner, joining name watch k, which runs and has
// listed already, missed a change to its object: one owner read before it
// joined, changed since, or one it found missing, made since. The watch's
// events before owner joined were not owner's, and a watch that has listed
// lists no more. A watch that has not listed yet shows owner its object
// when it does. s.mu is held.
func (s *Set) missed(owner types.NamespacedName, k key) bool {
	g, name, ok := k.named()
	if !ok || g.label != "" {
		return false
	}
	r, ok := s.serving(k)
	if !ok || !r.synced {
		return false
	}
	o, exists, _ := r.store.GetByKey(toolscache.NewObjectName(k.Namespace, name).String())
	want := object{cluster: k.cluster, resource: k.Resource, namespace: k.Namespace, name: name}
	version, read := "", false
	for _, rd := range s.reads[owner] {
		if rd.object == want {
			version, read = rd.version, true
		}
	}
	m, isMeta := asObject(o)
	switch {
	case !exists:
		// Gone since owner read it, or missing as owner found it.
		return read
	case !isMeta:
		return true
	default:
		return !read || m.ResourceVersion != version
	}
}
