package managedkind

import (
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxWrittenOver is how many versions of one object that the provider wrote
// over are remembered at most: a create writes a managed resource four times
// (finalizer, create pending, create succeeded, status).
const maxWrittenOver = 8

// writtenOver remembers, for each object the managed reconciler wrote, the
// versions its writes replaced. The cache may still hold one of those when
// the next reconcile reads the object: under load the provider's watch of
// its own managed resources lags its writes by seconds (BenchmarkFleet;
// TestWrittenOver holds the rule).
// Such a read is certainly stale (the provider itself replaced that version),
// and a reconcile of it is wasted: it cannot write (a conflict) and, right
// after a create, it even reports the create as incomplete (the
// create-succeeded annotation is not in it yet). Those reads go to the API
// server instead.
//
// Versions are opaque: only equality is used, never order.
//
// Only objects of the managed resource's type are remembered: the reconciler
// writes others (usages, connection Secrets) that it does not read back
// through the cache, so nothing would ever forget them.
type writtenOver struct {
	typ string // the managed resource's Go type
	mu  sync.Mutex
	rv  map[string][]string
}

func newWrittenOver(object client.Object) *writtenOver {
	return &writtenOver{typ: fmt.Sprintf("%T", object), rv: map[string][]string{}}
}

func writtenKey(key client.ObjectKey) string { return key.String() }

func (w *writtenOver) tracks(obj client.Object) bool {
	return w != nil && fmt.Sprintf("%T", obj) == w.typ
}

// wrote notes that a write replaced version rv of obj. A nil writtenOver
// notes nothing.
func (w *writtenOver) wrote(obj client.Object, rv string) {
	if !w.tracks(obj) || rv == "" {
		return
	}
	k := writtenKey(client.ObjectKeyFromObject(obj))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rv[k] = append(w.rv[k], rv)
	w.rv[k] = w.rv[k][max(0, len(w.rv[k])-maxWrittenOver):]
}

// stale reports whether obj, as read from the cache, is a version the
// provider has written over. Otherwise the cache has caught up with the
// provider's writes (or someone else wrote since), and they are forgotten.
func (w *writtenOver) stale(obj client.Object) bool {
	if !w.tracks(obj) {
		return false
	}
	k := writtenKey(client.ObjectKeyFromObject(obj))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, rv := range w.rv[k] {
		if rv == obj.GetResourceVersion() {
			return true
		}
	}
	delete(w.rv, k)
	return false
}

// forget forgets the writes of the object of type obj at key, which is gone.
func (w *writtenOver) forget(obj client.Object, key client.ObjectKey) {
	if !w.tracks(obj) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, writtenKey(key))
}

// len is how many objects have writes remembered.
func (w *writtenOver) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.rv)
}
