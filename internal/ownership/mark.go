package ownership

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// LabelManagedBy and ManagedBy say, on everything the provider makes, which
// tool manages it: the well-known label, for people and other tools. It
// names no managed resource, so it proves no ownership; the Mark does.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "provider-clusterops"
)

// A Mark is the label by which a kind marks the objects its managed resources
// make (or adopt), and by which it recognises them again: one label key per
// kind, whose value names the managed resource. The key is part of the
// objects in clusters: it never changes.
type Mark struct {
	// Key is the label key.
	Key string
	// value is what the label says of the managed resource.
	value func(mr metav1.Object) string
	// exists is the requirement that the key is there.
	exists labels.Requirement
}

// mark panics on a malformed key, as regexp.MustCompile does on a malformed
// expression: keys are constants, so a bad one fails when the provider starts.
func mark(key string, value func(mr metav1.Object) string) Mark {
	r, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		panic("ownership: invalid mark key " + key + ": " + err.Error())
	}
	return Mark{Key: key, value: value, exists: *r}
}

// ByName is a mark whose value is the managed resource's name. The marked
// object lives in the managed resource's namespace, where the name is unique,
// so an event of the object names the managed resource to reconcile. A
// managed resource deleted and made again under the same name recognises
// what the old one made as its own.
func ByName(key string) Mark {
	return mark(key, func(mr metav1.Object) string { return mr.GetName() })
}

// ByUID is a mark whose value is the managed resource's UID, for objects made
// outside its namespace (a name would be ambiguous there), and for objects a
// managed resource made again under the same name must not take for its own.
func ByUID(key string) Mark {
	return mark(key, func(mr metav1.Object) string { return string(mr.GetUID()) })
}

// Value is the label value that marks the objects mr makes.
func (m Mark) Value(mr metav1.Object) string { return m.value(mr) }

// Set marks obj as mr's.
func (m Mark) Set(obj, mr metav1.Object) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[m.Key] = m.Value(mr)
	obj.SetLabels(l)
}

// Remove takes the mark off obj: what an object taken over becomes when it
// is released.
func (m Mark) Remove(obj metav1.Object) {
	l := obj.GetLabels()
	if _, ok := l[m.Key]; !ok {
		return
	}
	delete(l, m.Key)
	obj.SetLabels(l)
}

// On reports whether obj carries mr's mark. A managed resource without a
// value (no UID yet) marks nothing.
func (m Mark) On(obj, mr metav1.Object) bool {
	v, ok := m.Of(obj)
	return ok && v != "" && v == m.Value(mr)
}

// Of returns the value of the mark obj carries, if any: the name or UID of
// the managed resource that made it.
func (m Mark) Of(obj metav1.Object) (string, bool) {
	v, ok := obj.GetLabels()[m.Key]
	return v, ok
}

// Selector selects the objects mr made.
func (m Mark) Selector(mr metav1.Object) labels.Selector {
	return labels.SelectorFromSet(labels.Set{m.Key: m.Value(mr)})
}

// Exists selects the objects any managed resource of the kind made: what a
// kind caches and watches.
func (m Mark) Exists() labels.Selector {
	return labels.NewSelector().Add(m.exists)
}
