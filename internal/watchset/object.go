package watchset

import (
	"iter"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// An Object is what a watch's store keeps of a watched object: its identity
// and version, and, for the watches that keep them, its labels and whether it
// is being deleted. A store holds one for every object its watch sees (a
// rule's every copy, every source of a fleet), so it keeps a few strings,
// not a PartialObjectMetadata's empty maps and slices (TestSlim;
// BenchmarkFleet's heap per resource). Objects in a store are shared and
// never written.
//
// It is a metav1.Object, as the informer's keys and indexes read it; the
// fields it does not keep read as empty and are not set.
type Object struct {
	Name, Namespace string
	UID             types.UID
	ResourceVersion string
	Labels          map[string]string
	// Deleting is whether the object has a deletion timestamp (kept by the
	// watches that keep labels).
	Deleting bool
}

// asObject returns what a store keeps of o: o itself when a store made it.
func asObject(o any) (*Object, bool) {
	switch m := o.(type) {
	case *Object:
		return m, true
	case *metav1.PartialObjectMetadata:
		return &Object{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			Labels: m.Labels, Deleting: m.DeletionTimestamp != nil}, true
	default:
		return nil, false
	}
}

var _ metav1.Object = &Object{}

// deletedAt stands for any deletion timestamp: a store keeps only that there
// is one.
var deletedAt = metav1.Time{}

func (o *Object) GetNamespace() string                          { return o.Namespace }
func (o *Object) SetNamespace(ns string)                        { o.Namespace = ns }
func (o *Object) GetName() string                               { return o.Name }
func (o *Object) SetName(n string)                              { o.Name = n }
func (o *Object) GetGenerateName() string                       { return "" }
func (o *Object) SetGenerateName(string)                        {}
func (o *Object) GetUID() types.UID                             { return o.UID }
func (o *Object) SetUID(uid types.UID)                          { o.UID = uid }
func (o *Object) GetResourceVersion() string                    { return o.ResourceVersion }
func (o *Object) SetResourceVersion(v string)                   { o.ResourceVersion = v }
func (o *Object) GetGeneration() int64                          { return 0 }
func (o *Object) SetGeneration(int64)                           {}
func (o *Object) GetSelfLink() string                           { return "" }
func (o *Object) SetSelfLink(string)                            {}
func (o *Object) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (o *Object) SetCreationTimestamp(metav1.Time)              {}
func (o *Object) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (o *Object) SetDeletionGracePeriodSeconds(*int64)          {}
func (o *Object) GetLabels() map[string]string                  { return o.Labels }
func (o *Object) SetLabels(l map[string]string)                 { o.Labels = l }
func (o *Object) GetAnnotations() map[string]string             { return nil }
func (o *Object) SetAnnotations(map[string]string)              {}
func (o *Object) GetFinalizers() []string                       { return nil }
func (o *Object) SetFinalizers([]string)                        {}
func (o *Object) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (o *Object) SetOwnerReferences([]metav1.OwnerReference)    {}
func (o *Object) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (o *Object) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

func (o *Object) GetDeletionTimestamp() *metav1.Time {
	if !o.Deleting {
		return nil
	}
	t := deletedAt
	return &t
}

func (o *Object) SetDeletionTimestamp(t *metav1.Time) { o.Deleting = t != nil }

// ownerSet is a set of owners: a slice while few, a map beyond. Most objects
// a coalesced watch serves have one owner (a rule's copies, a rollout's
// ConfigMap), and a slice of one is smaller than a map's smallest table
// (BenchmarkFleet's heap per resource; TestOwnerSet holds both forms).
type ownerSet struct {
	few  []types.NamespacedName
	many map[types.NamespacedName]struct{}
}

// fewOwners is how many owners an ownerSet keeps in its slice: a search of
// so many is as quick as a map's.
const fewOwners = 8

func (o *ownerSet) add(n types.NamespacedName) {
	switch {
	case o.many != nil:
		o.many[n] = struct{}{}
	case slices.Contains(o.few, n):
	case len(o.few) < fewOwners:
		o.few = append(o.few, n)
	default:
		o.many = make(map[types.NamespacedName]struct{}, len(o.few)+1)
		for _, f := range o.few {
			o.many[f] = struct{}{}
		}
		o.many[n], o.few = struct{}{}, nil
	}
}

func (o *ownerSet) del(n types.NamespacedName) {
	if o.many != nil {
		delete(o.many, n)
		return
	}
	if i := slices.Index(o.few, n); i >= 0 {
		o.few = slices.Delete(o.few, i, i+1)
	}
}

func (o *ownerSet) len() int {
	if o == nil {
		return 0
	}
	return len(o.few) + len(o.many)
}

// all yields every owner; nil yields none.
func (o *ownerSet) all() iter.Seq[types.NamespacedName] {
	return func(yield func(types.NamespacedName) bool) {
		if o == nil {
			return
		}
		if o.many != nil {
			for n := range o.many {
				if !yield(n) {
					return
				}
			}
			return
		}
		for _, n := range o.few {
			if !yield(n) {
				return
			}
		}
	}
}
