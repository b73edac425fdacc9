package watchset

// This file holds the coalescing of watches: watches of one name, or of one
// value of a label, fall into groups (a resource in a namespace of a
// cluster), and past coalesceAbove of them a group's watches share one
// informer instead of running one each, so that informers grow with the
// namespaces in use, not with the references.

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/clusterops/provider-clusterops/internal/target"
)

// coalesceAbove is how many name watches of a group run an informer each;
// one more and the group coalesces into one. A few are cheaper apart: a namespace's
// every object is more than a few names' worth.
const coalesceAbove = 4

// nameField prefixes the Fields of a name watch.
const nameField = "metadata.name="

// A group is where watches of one value coalesce: one resource in one
// namespace (or all, for a label) of one cluster, and either the name
// (label "") or the value of one label key.
type group struct {
	cluster   string
	resource  schema.GroupVersionResource
	namespace string
	label     string
}

// named returns the group of a watch of one value and the value it watches:
// a name watch, or a watch of exactly "key=value" for one label (a CopyRule's
// copies, by the rule's UID); false for any other watch. Values with
// characters a selector would read as more than one exact value do not
// coalesce, nor name watches of every namespace: their coalesced watch would be
// every object of the resource in the cluster. A label's coalesced watch holds
// only the objects that carry the label, in every namespace if need be.
func (k key) named() (group, string, bool) {
	if k.ReadLabels {
		return group{}, "", false
	}
	const odd = ",=!\\ ()"
	g := group{cluster: k.cluster, resource: k.Resource, namespace: k.Namespace}
	if name, ok := strings.CutPrefix(k.Fields, nameField); ok {
		if name == "" || strings.ContainsAny(name, odd) || k.Namespace == "" || k.Labels != "" {
			return group{}, "", false
		}
		return g, name, true
	}
	label, value, ok := strings.Cut(k.Labels, "=")
	if !ok || k.Fields != "" || label == "" || value == "" || strings.ContainsAny(label, odd) || strings.ContainsAny(value, odd) {
		return group{}, "", false
	}
	g.label = label
	return g, value, true
}

// watch returns the watch of value in g.
func (g group) watch(value string) key {
	w := Watch{Resource: g.resource, Namespace: g.namespace, Fields: nameField + value}
	if g.label != "" {
		w.Fields, w.Labels = "", g.label+"="+value
	}
	return key{cluster: g.cluster, Watch: w}
}

// value returns what o is to g: its name, or its value of g's label.
func (g group) value(o any) (string, bool) {
	m, err := meta.Accessor(o)
	if err != nil {
		return "", false
	}
	if g.label == "" {
		return m.GetName(), true
	}
	v, ok := m.GetLabels()[g.label]
	return v, ok
}

// byValue indexes a label group's coalesced store by the label's value in
// each object's namespace and in any (valueIn), so that a wide informer
// lists one namespace's objects of a value without reading every other's.
const byValue = "value"

// valueIn is the byValue key of label value v in namespace ns; "" is any.
func valueIn(ns, v string) string {
	if ns == "" {
		return "\x00" + v
	}
	return ns + "/" + v
}

// coalesce stops g's own name watches once its coalesced informer serves their
// owners, which are the Set's (values); s.mu is held.
func (s *Set) coalesce(g group) {
	for name := range s.named[g] {
		s.stopWatch(g.watch(name))
	}
}

// startCoalesced runs the informer that serves every name watch of g: the whole
// namespace, stripped by slim like any watch; s.mu is held.
func (s *Set) startCoalesced(c *target.Cluster, g group) error {
	r, err := s.inform(c, g.coalesced(), func(r *running, h Happening, objs ...any) { s.route(r, within(g), h, objs...) })
	if err != nil {
		return err
	}
	s.joinFamily(g, r)
	s.coalesced[g] = r
	return nil
}

// coalesced is the watch that serves every watch of g: the namespace's objects,
// or the objects that carry g's label.
func (g group) coalesced() Watch {
	return Watch{Resource: g.resource, Namespace: g.namespace, Labels: g.label}
}
