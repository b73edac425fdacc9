package configrollout

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions are the manager cache's options for the workloads, which
// ConfigRollout watches as metadata in every namespace: only what it decides
// on is kept of each (SlimWorkload).
func CacheOptions() map[client.Object]cache.ByObject {
	out := make(map[client.Object]cache.ByObject, len(Kinds))
	for _, kind := range Kinds {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(GroupVersionKind(kind))
		out[m] = cache.ByObject{Transform: SlimWorkload}
	}
	return out
}

// IsWorkloadMetadata is whether obj is the metadata of a workload kind, as
// the manager's cache watches them (CacheOptions).
func IsWorkloadMetadata(obj any) bool {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return false
	}
	gvk := m.GroupVersionKind()
	for _, kind := range Kinds {
		if gvk == GroupVersionKind(kind) {
			return true
		}
	}
	return false
}

// SlimWorkload keeps of a workload's metadata what ConfigRollout reads:
// identity, version, generation, labels (selectors), the deletion mark and
// the lock annotation. Every workload of the cluster is cached, and their
// other annotations can be large: one a client-side `kubectl apply` leaves
// holds the whole object. Objects that are not metadata lose their managed
// fields, as the cache's default does.
func SlimWorkload(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return stripManagedFields(in)
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Labels: m.Labels, DeletionTimestamp: m.DeletionTimestamp,
	}}
	if lock, ok := m.Annotations[AnnotationLock]; ok {
		out.Annotations = map[string]string{AnnotationLock: lock}
	}
	return out, nil
}

var (
	stripManagedFields                          = cache.TransformStripManagedFields()
	_                  toolscache.TransformFunc = SlimWorkload
)
