package watchset

// This file holds the transforms that cut a watched object down to what a
// store keeps of it (an Object): its identity and version, and the labels or
// deletion mark only where a watch needs them. The provider caches every
// object its managed resources reference, so each byte kept counts.

import (
	"maps"
	"strings"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// slim keeps of a watched object its identity and version, as an Object.
func slim(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	// A namespace's name is held once, not by each of its objects.
	return &Object{Name: m.Name, Namespace: unique.Make(m.Namespace).Value(), UID: m.UID, ResourceVersion: m.ResourceVersion}, nil
}

// isKey reports whether a label selector is one bare key: "exists".
func isKey(labels string) bool {
	return labels != "" && !strings.ContainsAny(labels, ",=!() ")
}

// slimKeeping is slim that also keeps one label. The objects of one value
// share one labels map, and so its strings: a label group's objects are many
// to a value (a rule's copies carry its UID), and a map of one label held by
// each would cost a map's table a copy (TestSlimKeepingSharesLabels). Cached
// objects are never written, so sharing is
// safe; at most maxSharedLabels values are remembered, then the table starts
// over, so values of objects long gone do not pile up.
func slimKeeping(label string) toolscache.TransformFunc {
	var mu sync.Mutex
	shared := map[string]map[string]string{}
	return func(o any) (any, error) {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			return o, nil
		}
		s, _ := slim(o)
		out, _ := s.(*Object)
		v, ok := m.Labels[label]
		if !ok {
			return out, nil
		}
		mu.Lock()
		defer mu.Unlock()
		l, ok := shared[v]
		if !ok {
			if len(shared) >= maxSharedLabels {
				clear(shared)
			}
			l = map[string]string{label: v}
			shared[v] = l
		}
		out.Labels = l
		return out, nil
	}
}

// maxSharedLabels bounds a label group's table of shared labels maps: about
// 350 bytes a value, once.
const maxSharedLabels = 4096

// slimKeepingLabels is slim that also keeps labels and the deletion mark.
func slimKeepingLabels(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	s, _ := slim(o)
	out, _ := s.(*Object)
	out.Labels, out.Deleting = m.Labels, m.DeletionTimestamp != nil
	return out, nil
}

func sameLabelsAndDeletion(was, is any) bool {
	a, ok := asObject(was)
	b, ok2 := asObject(is)
	if !ok || !ok2 {
		return false
	}
	return maps.Equal(a.Labels, b.Labels) && a.Deleting == b.Deleting
}

// sameVersion reports whether an update holds the version its object had
// already: only a relist delivers one.
func sameVersion(was, is any) bool {
	a, ok := asObject(was)
	b, ok2 := asObject(is)
	return ok && ok2 && a.ResourceVersion != "" && a.ResourceVersion == b.ResourceVersion
}
