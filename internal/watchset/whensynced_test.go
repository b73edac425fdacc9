package watchset_test

import (
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

// TestSyncedWithinWaitsForTheFirstList checks that an owner that waits in
// SyncedWithin for a new watch finds it synced once it has listed, and is
// not enqueued for it, nor for what it listed: a rule's first reconcile
// after a start decides from that list, and is not reconciled twice. A
// watch that never syncs returns false after the bound, with the owner
// enqueued as by WhenSynced once it stops.
func TestSyncedWithinWaitsForTheFirstList(t *testing.T) {
	ctx, s, q, c := started(t)
	ns := env.Namespace(t, "watchset-synced-within", nil)
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "present"}})
	owner := types.NamespacedName{Namespace: ns, Name: "owner"}
	synced, err := s.SyncedWithin(ctx, owner, 30*time.Second, func() error { return s.Ensure(owner, c, named(ns, "present")) })
	if err != nil || !synced {
		t.Fatalf("SyncedWithin(owner) = %v, %v for a watch that lists at once; want true", synced, err)
	}
	if got := received(q, time.Second); len(got) != 0 {
		t.Errorf("enqueued %v after the owner waited for its watch's list, want nothing", got)
	}

	other := types.NamespacedName{Namespace: ns, Name: "other"}
	never := watchset.Watch{Resource: schema.GroupVersionResource{Group: "nothing.example.org", Version: "v1", Resource: "things"}, Namespace: ns}
	start := time.Now()
	if synced, err := s.SyncedWithin(ctx, other, 300*time.Millisecond, func() error { return s.Ensure(other, c, never) }); err != nil || synced {
		t.Fatalf("SyncedWithin(other) = %v, %v for a watch of a resource that does not exist; want false", synced, err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("SyncedWithin returned after %v, want about its bound of 300ms", took)
	}
	s.Forget(other)
	if diff := cmp.Diff(map[types.NamespacedName]int{other: 1}, count(received(q, 2*time.Second))); diff != "" {
		t.Errorf("enqueued when the watch stopped unsynced: -want +got:\n%s", diff)
	}
}
