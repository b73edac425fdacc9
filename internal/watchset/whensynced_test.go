package watchset_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// TestWhenSynced checks that an owner told its watches have not synced yet is
// enqueued once they have, and then finds them synced; and that an owner
// waiting on a watch that stops before it ever syncs (one the API server
// refuses) is enqueued too, to decide otherwise, rather than wait forever.
func TestWhenSynced(t *testing.T) {
	ctx, s, q, c := started(t)
	ns := env.Namespace(t, "watchset-when-synced", nil)
	owner := types.NamespacedName{Namespace: ns, Name: "owner"}
	// A name nothing has: the watch's list brings no event of its own.
	if err := s.Ensure(owner, c, named(ns, "nothing")); err != nil {
		t.Fatal(err)
	}
	want := map[types.NamespacedName]int{}
	if !s.WhenSynced(owner) {
		want[owner] = 1
	}
	if diff := cmp.Diff(want, count(received(q, 2*time.Second))); diff != "" {
		t.Errorf("enqueued once the watch synced: -want +got:\n%s", diff)
	}
	if !s.WhenSynced(owner) {
		t.Error("WhenSynced(owner) = false after its watch synced")
	}
	if err := s.WaitSynced(ctx, owner); err != nil {
		t.Fatal(err)
	}

	// A resource the API server does not serve: its watch never syncs.
	other := types.NamespacedName{Namespace: ns, Name: "other"}
	never := watchset.Watch{Resource: schema.GroupVersionResource{Group: "nothing.example.org", Version: "v1", Resource: "things"}, Namespace: ns}
	if err := s.Ensure(other, c, never); err != nil {
		t.Fatal(err)
	}
	if s.WhenSynced(other) {
		t.Fatal("WhenSynced(other) = true for a watch of a resource that does not exist")
	}
	if got := received(q, 500*time.Millisecond); len(got) != 0 {
		t.Errorf("enqueued %v while the watch still tries to list", got)
	}
	s.Forget(other)
	if diff := cmp.Diff(map[types.NamespacedName]int{other: 1}, count(received(q, 2*time.Second))); diff != "" {
		t.Errorf("enqueued when the watch stopped unsynced: -want +got:\n%s", diff)
	}
}

// TestWhenSyncedEnqueuesOnceForAllWatches checks that an owner waiting for
// several watches is enqueued once, by the last of them to sync or stop, and
// not once by each: a rule resuming after a start waits for about three,
// and each enqueue is a reconcile of every rule of a fleet.
func TestWhenSyncedEnqueuesOnceForAllWatches(t *testing.T) {
	_, s, q, c := started(t)
	ns := env.Namespace(t, "watchset-when-all-synced", nil)
	owner := types.NamespacedName{Namespace: ns, Name: "owner"}
	never := watchset.Watch{Resource: schema.GroupVersionResource{Group: "nothing.example.org", Version: "v1", Resource: "things"}, Namespace: ns}
	if err := s.Ensure(owner, c, named(ns, "nothing"), never); err != nil {
		t.Fatal(err)
	}
	if s.WhenSynced(owner) {
		t.Fatal("WhenSynced(owner) = true with a watch of a resource that does not exist")
	}
	if got := received(q, 2*time.Second); len(got) != 0 {
		t.Errorf("enqueued %v once one of two watches synced, want nothing until both have", got)
	}
	// The watch that cannot sync stops: the owner waits for nothing more.
	if err := s.Ensure(owner, c, named(ns, "nothing")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{owner: 1}, count(received(q, 2*time.Second))); diff != "" {
		t.Errorf("enqueued once the last watch it waited for stopped: -want +got:\n%s", diff)
	}
}

// TestWaitingOwnerIsEnqueuedOnceForItsWatchsList checks that an owner told
// its new watch has not synced hears nothing of the objects the watch's
// list shows, and is enqueued once, when it has synced: it decides from the
// whole list then. Without this, a rule resuming after a start was
// reconciled once for the list and once for the sync, or more.
func TestWaitingOwnerIsEnqueuedOnceForItsWatchsList(t *testing.T) {
	_, s, q, c := started(t)
	tl := counting(q)
	ns := env.Namespace(t, "watchset-waiting-owner", nil)
	for i := range 50 {
		env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i)}})
	}
	owner := types.NamespacedName{Namespace: ns, Name: "owner"}
	w := configMaps
	w.Namespace = ns
	if err := s.Ensure(owner, c, w); err != nil {
		t.Fatal(err)
	}
	want := map[types.NamespacedName]int{}
	if !s.WhenSynced(owner) {
		want[owner] = 1
	}
	time.Sleep(2 * time.Second)
	if diff := cmp.Diff(want, tl.snapshot()); diff != "" {
		t.Errorf("enqueued for a list of 50 objects: -want +got:\n%s", diff)
	}
}
