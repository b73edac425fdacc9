package watchset_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/internal/flow"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/testenv"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		if env, err = testenv.Start(false); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer env.Stop() //nolint:errcheck // Best effort at exit.
		return m.Run()
	}())
}

var configMaps = watchset.Watch{Resource: corev1.SchemeGroupVersion.WithResource("configmaps")}

// received returns the requests the set's source queued within a short while.
func received(q workqueue.TypedRateLimitingInterface[reconcile.Request], within time.Duration) []types.NamespacedName {
	var got []types.NamespacedName
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for q.Len() > 0 {
			r, _ := q.Get()
			got = append(got, r.NamespacedName)
			q.Done(r)
			q.Forget(r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return got
}

// started returns a running Set on the test's API server and the queue its
// source fills; both stop when the test ends.
func started(t *testing.T) (context.Context, *watchset.Set, workqueue.TypedRateLimitingInterface[reconcile.Request], *target.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s := watchset.New(logging.NewNopLogger())
	go s.Start(ctx) //nolint:errcheck // Start returns nil.
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	if err := s.Source(testFlow(t)).Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	return ctx, s, q, &target.Cluster{ID: target.LocalID, Config: env.Config}
}

func TestWatchesEnqueueOnlyTheirOwners(t *testing.T) {
	ctx, s, q, c := started(t)
	ns := env.Namespace(t, "watchset", nil)

	a := types.NamespacedName{Namespace: ns, Name: "a"}
	b := types.NamespacedName{Namespace: ns, Name: "b"}
	conf := configMaps
	conf.Namespace, conf.Fields = ns, "metadata.name=conf"
	other := configMaps
	other.Namespace, other.Labels = ns, "app=other"

	// a and b share the watch on "conf"; b also watches labelled ones.
	if err := s.Ensure(a, c, conf); err != nil {
		t.Fatal(err)
	}
	if err := s.Ensure(b, c, conf, other); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(2, s.Len()); diff != "" {
		t.Errorf("shared watches: -want +got:\n%s", diff)
	}
	for _, o := range []types.NamespacedName{a, b} {
		if err := s.WaitSynced(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	create := func(name string, lbls map[string]string) {
		t.Helper()
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}); err != nil {
			t.Fatal(err)
		}
	}

	create("unrelated", nil)
	if got := received(q, 500*time.Millisecond); len(got) != 0 {
		t.Errorf("an object no watch selects enqueued %v", got)
	}
	create("conf", nil)
	if diff := cmp.Diff(map[types.NamespacedName]int{a: 1, b: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("event on a shared watch: -want +got:\n%s", diff)
	}
	create("labelled", map[string]string{"app": "other"})
	if diff := cmp.Diff(map[types.NamespacedName]int{b: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("event on b's own watch: -want +got:\n%s", diff)
	}

	// b lets go of "conf": the watch keeps running for a alone.
	if err := s.Ensure(b, c, other); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{a: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("event after b let go: -want +got:\n%s", diff)
	}

	// Forgetting both owners stops every watch.
	s.Forget(a)
	if err := s.Ensure(b, c); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(0, s.Len()); diff != "" {
		t.Errorf("watches after their owners went: -want +got:\n%s", diff)
	}
}

func count(got []types.NamespacedName) map[types.NamespacedName]int {
	m := map[types.NamespacedName]int{}
	for _, o := range got {
		m[o]++
	}
	return m
}

// TestListServesWhatTheWatchKept checks that a watch that keeps labels serves
// reads once synced, with labels and deletion marks, and only then.
func TestListServesWhatTheWatchKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := watchset.New(logging.NewNopLogger())
	go s.Start(ctx) //nolint:errcheck // Start returns nil.
	c := &target.Cluster{ID: target.LocalID, Config: env.Config}
	ns := env.Namespace(t, "watchset-list", nil)
	w := configMaps
	w.Namespace, w.ReadLabels = ns, true
	if _, ok := s.List(c, w); ok {
		t.Fatal("List served a watch nobody started")
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Labels: map[string]string{"team": "x"}, Annotations: map[string]string{"big": "data"}}}); err != nil {
		t.Fatal(err)
	}
	owner := types.NamespacedName{Namespace: ns, Name: "reader"}
	if err := s.Ensure(owner, c, w); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSynced(ctx, owner); err != nil {
		t.Fatal(err)
	}
	l, ok := s.List(c, w)
	if !ok || len(l) != 1 {
		t.Fatalf("List after sync = %v, %v; want the one ConfigMap", l, ok)
	}
	if diff := cmp.Diff(map[string]string{"team": "x"}, l[0].Labels); diff != "" {
		t.Errorf("labels kept: -want +got:\n%s", diff)
	}
	// An Object has no room for annotations: only identity, version, labels.
	if l[0].Name != "a" || l[0].Namespace != ns || l[0].UID == "" || l[0].ResourceVersion == "" {
		t.Errorf("List kept %+v; want the ConfigMap's identity and version", *l[0])
	}
	// The same watch without ReadLabels is another watch: not started, not served.
	w.ReadLabels = false
	if _, ok := s.List(c, w); ok {
		t.Error("List served a watch that keeps no labels and was never started")
	}
}

// TestInterestNarrowsEvents checks that an owner's Interest keeps events of a
// shared watch that do not concern it from enqueueing it.
func TestInterestNarrowsEvents(t *testing.T) {
	ctx, s, q, c := started(t)
	ns := env.Namespace(t, "watchset-interest", nil)
	w := configMaps
	w.Namespace = ns
	picky := types.NamespacedName{Namespace: ns, Name: "picky"}
	all := types.NamespacedName{Namespace: ns, Name: "all"}
	s.SetInterest(picky, func(_ watchset.Watch, o *watchset.Object) bool { return o.Name == "wanted" })
	for _, o := range []types.NamespacedName{picky, all} {
		if err := s.Ensure(o, c, w); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitSynced(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// One object at a time: the queue folds repeated requests of an owner.
	for _, tc := range []struct {
		name string
		want map[types.NamespacedName]int
	}{
		{"other", map[types.NamespacedName]int{all: 1}},
		{"wanted", map[types.NamespacedName]int{all: 1, picky: 1}},
	} {
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, count(received(q, time.Second))); diff != "" {
			t.Errorf("events of %s: -want +got:\n%s", tc.name, diff)
		}
	}
}

// named is a watch of the ConfigMap called name in namespace ns.
func named(ns, name string) watchset.Watch {
	w := configMaps
	w.Namespace, w.Fields = ns, "metadata.name="+name
	return w
}

// TestEnsureIsAllOrNothing checks that when one of several new watches cannot
// start, the ones started before it stop and the owner keeps its old watches.
func TestEnsureIsAllOrNothing(t *testing.T) {
	ctx, s, q, c := started(t)
	ns := env.Namespace(t, "watchset-all-or-nothing", nil)
	owner := types.NamespacedName{Namespace: ns, Name: "owner"}
	if err := s.Ensure(owner, c, named(ns, "old")); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSynced(ctx, owner); err != nil {
		t.Fatal(err)
	}
	before := s.Len()

	// The second watch to start fails; the contexts tell which were stopped.
	errBoom := errors.New("boom")
	var starts []context.Context
	watchset.SetStartHook(s, func(ctx context.Context, _ watchset.Watch) error {
		starts = append(starts, ctx)
		if len(starts) == 2 {
			return errBoom
		}
		return nil
	})
	if err := s.Ensure(owner, c, named(ns, "a"), named(ns, "b"), named(ns, "c")); !errors.Is(err, errBoom) {
		t.Fatalf("Ensure(...) = %v, want %v", err, errBoom)
	}
	if diff := cmp.Diff(2, len(starts)); diff != "" {
		t.Fatalf("starts attempted: -want +got:\n%s", diff)
	}
	for i, sc := range starts {
		if sc.Err() == nil {
			t.Errorf("watch started %d of the failed Ensure still runs", i+1)
		}
	}
	if diff := cmp.Diff(before, s.Len()); diff != "" {
		t.Errorf("watches after a failed Ensure: -want +got:\n%s", diff)
	}
	if !s.Synced(owner) {
		t.Error("Synced(owner) = false after a failed Ensure, want its old watch still synced")
	}
	// The old watch still runs and still enqueues its owner.
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{owner: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("event on the old watch: -want +got:\n%s", diff)
	}
	// Nothing was left running that Forget does not know of.
	s.Forget(owner)
	if diff := cmp.Diff(0, s.Len()); diff != "" {
		t.Errorf("watches after Forget: -want +got:\n%s", diff)
	}
}

// TestSyncedAfterFailedEnsure checks that Synced neither panics nor loses the
// owner's watch after an Ensure that would have released it failed.
func TestSyncedAfterFailedEnsure(t *testing.T) {
	ctx, s, _, c := started(t)
	ns := env.Namespace(t, "watchset-synced", nil)
	owner := types.NamespacedName{Namespace: ns, Name: "owner"}
	if err := s.Ensure(owner, c, named(ns, "old")); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSynced(ctx, owner); err != nil {
		t.Fatal(err)
	}
	errBoom := errors.New("boom")
	watchset.SetStartHook(s, func(context.Context, watchset.Watch) error { return errBoom })
	if err := s.Ensure(owner, c, named(ns, "new")); !errors.Is(err, errBoom) {
		t.Fatalf("Ensure(...) = %v, want %v", err, errBoom)
	}
	if !s.Synced(owner) {
		t.Error("Synced(owner) = false after a failed Ensure, want its old watch still synced")
	}
	if diff := cmp.Diff(1, s.Len()); diff != "" {
		t.Errorf("watches after a failed Ensure: -want +got:\n%s", diff)
	}
}

// testFlow is a provider's flow control, its metrics in a registry of its own.
func testFlow(t *testing.T) *flow.Control {
	t.Helper()
	fc, err := flow.New(flow.Options{ReconcileRate: 100}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return fc
}
