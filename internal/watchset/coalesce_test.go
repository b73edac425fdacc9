package watchset_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// owning makes n owners in ns, owner i naming ConfigMap cm-i, and waits until
// they are synced.
func owning(ctx context.Context, t *testing.T, s *watchset.Set, c *target.Cluster, ns string, n int) []types.NamespacedName {
	t.Helper()
	owners := make([]types.NamespacedName, n)
	for i := range owners {
		owners[i] = types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("owner-%d", i)}
		if err := s.Ensure(owners[i], c, named(ns, fmt.Sprintf("cm-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range owners {
		if err := s.WaitSynced(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return owners
}

// configMapsIn creates ConfigMaps cm-0 to cm-(n-1) in ns.
func configMapsIn(ctx context.Context, t *testing.T, ns string, n int) {
	t.Helper()
	for i := range n {
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// touch updates ConfigMap name in ns.
func touch(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"at": time.Now().String()}
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
}

func names(l []*watchset.Object) []string {
	out := make([]string, 0, len(l))
	for _, m := range l {
		out = append(out, m.Name)
	}
	return out
}

// TestNameWatchesCoalesce checks that many owners naming objects of one
// namespace share one watch, and that its events still reach only the owner
// of the object's name.
func TestNameWatchesCoalesce(t *testing.T) {
	ctx, s, q, c := started(t)
	watchset.SetCoalesceAbove(s, 4)
	ns := env.Namespace(t, "watchset-coalesce", nil)
	configMapsIn(ctx, t, ns, 10)
	owners := owning(ctx, t, s, c, ns, 10)
	if diff := cmp.Diff(1, s.Len()); diff != "" {
		t.Errorf("watches of 10 names in one namespace: -want +got:\n%s", diff)
	}
	for _, o := range owners {
		if !s.Synced(o) {
			t.Errorf("Synced(%s) = false, want true", o)
		}
	}
	// The coalesced watch's first list reaches the owners that moved over.
	received(q, 500*time.Millisecond)

	touch(ctx, t, ns, "cm-3")
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[3]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("update of cm-3: -want +got:\n%s", diff)
	}
	if err := env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm-5"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[5]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("delete of cm-5: -want +got:\n%s", diff)
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nobodys"}}); err != nil {
		t.Fatal(err)
	}
	if got := received(q, 500*time.Millisecond); len(got) != 0 {
		t.Errorf("an object nobody names enqueued %v", got)
	}

	l, ok := s.List(c, named(ns, "cm-7"))
	if diff := cmp.Diff([]string{"cm-7"}, names(l)); !ok || diff != "" {
		t.Errorf("List(cm-7) ok = %v; -want +got:\n%s", ok, diff)
	}
	if l, ok := s.List(c, named(ns, "cm-5")); !ok || len(l) != 0 {
		t.Errorf("List(cm-5) = %v, %v after its deletion; want none, true", names(l), ok)
	}
}

// TestFewNameWatchesRunApart checks that up to the threshold each name keeps a
// watch of its own, behaving as before.
func TestFewNameWatchesRunApart(t *testing.T) {
	ctx, s, q, c := started(t)
	watchset.SetCoalesceAbove(s, 4)
	ns := env.Namespace(t, "watchset-apart", nil)
	configMapsIn(ctx, t, ns, 3)
	owners := owning(ctx, t, s, c, ns, 3)
	if diff := cmp.Diff(3, s.Len()); diff != "" {
		t.Errorf("watches of 3 names: -want +got:\n%s", diff)
	}
	received(q, 500*time.Millisecond)
	touch(ctx, t, ns, "cm-1")
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[1]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("update of cm-1: -want +got:\n%s", diff)
	}
	l, ok := s.List(c, named(ns, "cm-2"))
	if diff := cmp.Diff([]string{"cm-2"}, names(l)); !ok || diff != "" {
		t.Errorf("List(cm-2) ok = %v; -want +got:\n%s", ok, diff)
	}
}

// TestCoalescedOwnersComeAndGo checks the bookkeeping of a coalesced watch: an
// owner changing its name leaves the others served, and the watch stops with
// its last owner.
func TestCoalescedOwnersComeAndGo(t *testing.T) {
	ctx, s, q, c := started(t)
	watchset.SetCoalesceAbove(s, 4)
	ns := env.Namespace(t, "watchset-come-go", nil)
	configMapsIn(ctx, t, ns, 10)
	owners := owning(ctx, t, s, c, ns, 10)
	received(q, 500*time.Millisecond)

	// Owner 0 names another ConfigMap now.
	if err := s.Ensure(owners[0], c, named(ns, "cm-new")); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSynced(ctx, owners[0]); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(1, s.Len()); diff != "" {
		t.Errorf("watches after a rename: -want +got:\n%s", diff)
	}
	touch(ctx, t, ns, "cm-0")
	if got := received(q, 500*time.Millisecond); len(got) != 0 {
		t.Errorf("the name owner 0 let go of enqueued %v", got)
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm-new"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[0]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("creation of owner 0's new name: -want +got:\n%s", diff)
	}
	touch(ctx, t, ns, "cm-1")
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[1]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("update of cm-1 after owner 0 moved: -want +got:\n%s", diff)
	}

	// One owner letting go of a name another shares keeps it served. Owner
	// 2 joins a name it never read: it is told of the object once, as the
	// running watch will not list it again.
	if err := s.Ensure(owners[2], c, named(ns, "cm-2"), named(ns, "cm-3")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[2]: 1}, count(received(q, 500*time.Millisecond))); diff != "" {
		t.Errorf("owner 2 joining cm-3: -want +got:\n%s", diff)
	}
	s.Forget(owners[3])
	touch(ctx, t, ns, "cm-3")
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[2]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("update of cm-3 after its first owner went: -want +got:\n%s", diff)
	}

	for i, o := range owners {
		s.Forget(o)
		if i < len(owners)-1 && s.Len() != 1 {
			t.Fatalf("watches with %d owners left: %d, want 1", len(owners)-1-i, s.Len())
		}
	}
	if diff := cmp.Diff(0, s.Len()); diff != "" {
		t.Errorf("watches after every owner went: -want +got:\n%s", diff)
	}
}

// TestCoalescingWhileEventsFlow checks that a change right after a group
// switches to its coalesced watch, before that has synced, reaches its owner.
func TestCoalescingWhileEventsFlow(t *testing.T) {
	ctx, s, q, c := started(t)
	watchset.SetCoalesceAbove(s, 4)
	ns := env.Namespace(t, "watchset-switch", nil)
	configMapsIn(ctx, t, ns, 4)
	owners := owning(ctx, t, s, c, ns, 4)
	received(q, 500*time.Millisecond)

	// The fifth name switches the group; cm-1 changes and cm-4 appears at once.
	fifth := types.NamespacedName{Namespace: ns, Name: "owner-4"}
	if err := s.Ensure(fifth, c, named(ns, "cm-4")); err != nil {
		t.Fatal(err)
	}
	touch(ctx, t, ns, "cm-1")
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm-4"}}); err != nil {
		t.Fatal(err)
	}
	got := count(received(q, time.Second))
	for _, o := range []types.NamespacedName{owners[1], fifth} {
		if got[o] == 0 {
			t.Errorf("%s not enqueued by a change right after the switch; got %v", o, got)
		}
	}
	if diff := cmp.Diff(1, s.Len()); diff != "" {
		t.Errorf("watches after the switch: -want +got:\n%s", diff)
	}
	// Once synced, the coalesced watch routes as any.
	for _, o := range append(owners, fifth) {
		if err := s.WaitSynced(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	received(q, 200*time.Millisecond)
	touch(ctx, t, ns, "cm-2")
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[2]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("update of cm-2 after the switch: -want +got:\n%s", diff)
	}
}

// TestCoalescingIsAllOrNothing checks that when a group's coalesced watch cannot
// start, nothing changes: the group's own watches keep serving their owners
// and a watch the same Ensure started stops.
func TestCoalescingIsAllOrNothing(t *testing.T) {
	ctx, s, q, c := started(t)
	watchset.SetCoalesceAbove(s, 4)
	ns := env.Namespace(t, "watchset-coalesce-fails", nil)
	configMapsIn(ctx, t, ns, 4)
	owners := owning(ctx, t, s, c, ns, 4)
	received(q, 500*time.Millisecond)

	errBoom := errors.New("boom")
	starts := map[string]context.Context{}
	watchset.SetStartHook(s, func(ctx context.Context, w watchset.Watch) error {
		starts[w.Labels+w.Fields] = ctx
		if w.Labels == "" && w.Fields == "" {
			return errBoom
		}
		return nil
	})
	// An existence selector is grouped with nothing, so the same Ensure
	// always starts it before it tries the group's coalesced watch (a label=value
	// selector would form a group of its own, tried in map order).
	labelled := configMaps
	labelled.Namespace, labelled.Labels = ns, "app"
	fifth := types.NamespacedName{Namespace: ns, Name: "owner-4"}
	if err := s.Ensure(fifth, c, labelled, named(ns, "cm-4")); !errors.Is(err, errBoom) {
		t.Fatalf("Ensure(fifth) = %v, want %v", err, errBoom)
	}
	// An owner already in the group adding a name fails alike and keeps its own.
	if err := s.Ensure(owners[0], c, named(ns, "cm-0"), named(ns, "cm-extra")); !errors.Is(err, errBoom) {
		t.Fatalf("Ensure(owner 0) = %v, want %v", err, errBoom)
	}
	if diff := cmp.Diff(2, len(starts)); diff != "" {
		t.Fatalf("starts attempted: -want +got:\n%s", diff)
	}
	for w, sc := range starts {
		if sc.Err() == nil {
			t.Errorf("watch %q started by a failed Ensure still runs", w)
		}
	}
	if diff := cmp.Diff(4, s.Len()); diff != "" {
		t.Errorf("watches after failed Ensures: -want +got:\n%s", diff)
	}
	for _, o := range owners {
		if !s.Synced(o) {
			t.Errorf("Synced(%s) = false after a failed Ensure, want its own watch still synced", o)
		}
	}
	touch(ctx, t, ns, "cm-0")
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[0]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("update of cm-0 after failed Ensures: -want +got:\n%s", diff)
	}

	// Once the coalesced watch can start, the group coalesces.
	watchset.SetStartHook(s, nil)
	if err := s.Ensure(fifth, c, named(ns, "cm-4")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(1, s.Len()); diff != "" {
		t.Errorf("watches after the group coalesced: -want +got:\n%s", diff)
	}
	for _, o := range owners {
		s.Forget(o)
	}
	s.Forget(fifth)
	if diff := cmp.Diff(0, s.Len()); diff != "" {
		t.Errorf("watches after Forget: -want +got:\n%s", diff)
	}
}

// goroutinesOnceSteady returns the number of goroutines once it stops falling: stopped
// informers' goroutines end a little after they are told to.
func goroutinesOnceSteady() int {
	n := runtime.NumGoroutine()
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

// TestCoalescingSavesGoroutines checks that 40 owners naming ConfigMaps of one
// namespace cost about one informer's goroutines, not 40 informers'.
func TestCoalescingSavesGoroutines(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name          string
		coalesceAbove int
		watches       int
		ok            func(grown int) bool
		want          string
	}{
		{"Coalesced", 4, 1, func(g int) bool { return g < n }, fmt.Sprintf("< %d", n)},
		{"Apart", n, n, func(g int) bool { return g >= 4*n }, fmt.Sprintf(">= %d", 4*n)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, s, _, c := started(t)
			watchset.SetCoalesceAbove(s, tc.coalesceAbove)
			ns := env.Namespace(t, "watchset-goroutines", nil)
			before := goroutinesOnceSteady()
			owning(ctx, t, s, c, ns, n)
			if diff := cmp.Diff(tc.watches, s.Len()); diff != "" {
				t.Errorf("watches of %d names: -want +got:\n%s", n, diff)
			}
			// Polled: the per-name watches a switch replaced end a little late.
			grown := runtime.NumGoroutine() - before
			for deadline := time.Now().Add(10 * time.Second); !tc.ok(grown) && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
				grown = runtime.NumGoroutine() - before
			}
			if !tc.ok(grown) {
				t.Errorf("goroutines grew by %d for %d owners, want %s", grown, n, tc.want)
			}
			t.Logf("goroutines grew by %d for %d owners", grown, n)
		})
	}
}

// TestLabelWatchesCoalesce checks that watches of one label's values in every
// namespace (a CopyRule's copies, by the rule's UID) share one watch of the
// objects carrying the label, and that an event reaches the owners of the
// object's value only: of both values when an object moves between them.
func TestLabelWatchesCoalesce(t *testing.T) {
	ctx, s, q, c := started(t)
	watchset.SetCoalesceAbove(s, 4)
	const key = "test.clusterops.io/rule"
	cm := corev1.SchemeGroupVersion.WithResource("configmaps")
	byRule := func(v string) watchset.Watch { return watchset.Watch{Resource: cm, Labels: key + "=" + v} }
	a, b := env.Namespace(t, "watchset-label-a", nil), env.Namespace(t, "watchset-label-b", nil)
	owners := make([]types.NamespacedName, 8)
	for i := range owners {
		owners[i] = types.NamespacedName{Namespace: a, Name: fmt.Sprintf("rule-%d", i)}
		if err := s.Ensure(owners[i], c, byRule(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range owners {
		if err := s.WaitSynced(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(1, s.Len()); diff != "" {
		t.Errorf("watches of 8 values of one label: -want +got:\n%s", diff)
	}
	received(q, 500*time.Millisecond)
	copyOf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "copy", Labels: map[string]string{key: "2"}}}
	if err := env.Client.Create(ctx, copyOf); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[2]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("a copy of rule 2 in another namespace: -want +got:\n%s", diff)
	}
	l, ok := s.List(c, byRule("2"))
	if diff := cmp.Diff([]string{"copy"}, names(l)); !ok || diff != "" {
		t.Errorf("List(rule 2) ok = %v; -want +got:\n%s", ok, diff)
	}
	if l, ok := s.List(c, byRule("3")); !ok || len(l) != 0 {
		t.Errorf("List(rule 3) = %v, %v; want none, true", names(l), ok)
	}
	copyOf.Labels[key] = "5"
	if err := env.Client.Update(ctx, copyOf); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{owners[2]: 1, owners[5]: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("the copy moved from rule 2 to rule 5: -want +got:\n%s", diff)
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "unlabelled"}}); err != nil {
		t.Fatal(err)
	}
	if got := received(q, 500*time.Millisecond); len(got) != 0 {
		t.Errorf("an object without the label enqueued %v", got)
	}
}

// TestCrowdedNamespaceSharesAtOnce: an owner whose namespace holds more of
// its kind than a few name watches' worth starts the namespace's coalesced watch
// at once, as after a restart; a name elsewhere, or in a namespace of few,
// is watched by name. Events still reach only the name's owner.
func TestCrowdedNamespaceSharesAtOnce(t *testing.T) {
	ctx, s, q, c := started(t)
	watchset.SetCoalesceAbove(s, 4)
	crowded := env.Namespace(t, "watchset-crowded", nil)
	few := env.Namespace(t, "watchset-few", nil)
	configMapsIn(ctx, t, crowded, 2)
	peers := watchset.NewPeers()
	for i := range 5 {
		peers.OnAdd(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: crowded, Name: fmt.Sprintf("mr-%d", i)}}, true)
	}
	peers.OnAdd(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: few, Name: "mr"}}, true)
	s.CountPeers(peers)
	var starts []watchset.Watch
	watchset.SetStartHook(s, func(_ context.Context, w watchset.Watch) error {
		starts = append(starts, w)
		return nil
	})
	cms := corev1.SchemeGroupVersion.WithResource("configmaps")
	first := types.NamespacedName{Namespace: crowded, Name: "mr-0"}
	if err := s.Ensure(first, c, named(crowded, "cm-0")); err != nil {
		t.Fatal(err)
	}
	if err := s.Ensure(types.NamespacedName{Namespace: crowded, Name: "mr-1"}, c, named(crowded, "cm-1"), named(few, "cm-x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Ensure(types.NamespacedName{Namespace: few, Name: "mr"}, c, named(few, "cm-y")); err != nil {
		t.Fatal(err)
	}
	want := []watchset.Watch{{Resource: cms, Namespace: crowded}, named(few, "cm-x"), named(few, "cm-y")}
	if diff := cmp.Diff(want, starts); diff != "" {
		t.Errorf("watches started: -want +got:\n%s", diff)
	}
	if err := s.WaitSynced(ctx, first); err != nil {
		t.Fatal(err)
	}
	received(q, 500*time.Millisecond)
	touch(ctx, t, crowded, "cm-0")
	if diff := cmp.Diff(map[types.NamespacedName]int{first: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("update of cm-0: -want +got:\n%s", diff)
	}

	peers.OnDelete(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: few, Name: "mr"}})
	if got := peers.In(few); got != 0 {
		t.Errorf("peers in %s after the last one went: %d, want 0", few, got)
	}
}
