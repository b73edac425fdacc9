package watchset_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// tally counts the requests a Set's queue receives, per owner, as they come.
type tally struct {
	mu sync.Mutex
	n  map[types.NamespacedName]int
}

func counting(q workqueue.TypedRateLimitingInterface[reconcile.Request]) *tally {
	t := &tally{n: map[types.NamespacedName]int{}}
	go func() {
		for {
			r, shutdown := q.Get()
			if shutdown {
				return
			}
			t.mu.Lock()
			t.n[r.NamespacedName]++
			t.mu.Unlock()
			q.Done(r)
			q.Forget(r)
		}
	}()
	return t
}

func (t *tally) snapshot() map[types.NamespacedName]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[types.NamespacedName]int, len(t.n))
	for o, n := range t.n {
		out[o] = n
	}
	return out
}

// round changes the ConfigMap cm-0 each owner names and waits until every
// owner has been enqueued since: no change is lost, whatever serves it.
func round(ctx context.Context, t *testing.T, tl *tally, owners []types.NamespacedName) {
	t.Helper()
	before := tl.snapshot()
	for _, o := range owners {
		touch(ctx, t, o.Namespace, "cm-0")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		now := tl.snapshot()
		var late []types.NamespacedName
		for _, o := range owners {
			if now[o] <= before[o] {
				late = append(late, o)
			}
		}
		if len(late) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("changes never reached %v", late)
		}
	}
}

// spread makes an owner in each of n new namespaces naming its ConfigMap cm-0.
func spread(ctx context.Context, t *testing.T, s *watchset.Set, c *target.Cluster, n int) []types.NamespacedName {
	t.Helper()
	owners := make([]types.NamespacedName, 0, n)
	for i := range n {
		ns := env.Namespace(t, fmt.Sprintf("watchset-wide-%d", i), nil)
		configMapsIn(ctx, t, ns, 1)
		owners = append(owners, types.NamespacedName{Namespace: ns, Name: "owner"})
	}
	return owners
}

// informers polls until s runs narrow and wide informers, or fails.
func informers(t *testing.T, s *watchset.Set, narrow, wide int) {
	t.Helper()
	var n, w int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, w = s.Informers(); n == narrow && w == wide {
			return
		}
	}
	t.Fatalf("informers: %d narrow, %d wide; want %d, %d", n, w, narrow, wide)
}

// TestStrategySwitchLosesNoEvent holds wide.go's switch: owners naming
// ConfigMaps in more namespaces than the threshold share one wide informer,
// and fewer than half of it narrow ones again; changes made while either
// switch runs reach their owners, and a switch itself enqueues no owner whose
// object did not change.
func TestStrategySwitchLosesNoEvent(t *testing.T) {
	const above = 6
	ctx, s, q, c := started(t)
	watchset.SetWideAbove(s, above)
	tl := counting(q)
	owners := spread(ctx, t, s, c, above+4)
	ensure := func(os ...types.NamespacedName) {
		t.Helper()
		for _, o := range os {
			if err := s.Ensure(o, c, named(o.Namespace, "cm-0")); err != nil {
				t.Fatal(err)
			}
		}
	}
	ensure(owners[:above]...)
	informers(t, s, above, 0)
	for _, o := range owners[:above] {
		if err := s.WaitSynced(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)

	// A quiet switch enqueues only the owner that joined.
	before := tl.snapshot()
	ensure(owners[above])
	informers(t, s, 0, 1)
	time.Sleep(500 * time.Millisecond)
	got := tl.snapshot()
	for _, o := range owners[:above] {
		if got[o] != before[o] {
			t.Errorf("%s enqueued %d times by a switch to wide; its object did not change", o, got[o]-before[o])
		}
	}

	// Changes while the family switches back and forth reach every owner.
	const few = above/2 - 1
	for i := above + 1; i < len(owners); i++ {
		ensure(owners[i])
		round(ctx, t, tl, owners[:i])
	}
	for i := len(owners) - 1; i >= few; i-- {
		s.Forget(owners[i])
		round(ctx, t, tl, owners[:i])
		round(ctx, t, tl, owners[:i])
	}
	informers(t, s, few, 0)
	round(ctx, t, tl, owners[:few])

	// A quiet switch to narrow enqueues nobody.
	ensure(owners[few : above+1]...)
	round(ctx, t, tl, owners[:above+1])
	informers(t, s, 0, 1)
	time.Sleep(500 * time.Millisecond)
	before = tl.snapshot()
	for _, o := range owners[few : above+1] {
		s.Forget(o)
	}
	informers(t, s, few, 0)
	time.Sleep(500 * time.Millisecond)
	if diff := cmp.Diff(before, tl.snapshot()); diff != "" {
		t.Errorf("requests across a quiet switch to narrow: -want +got:\n%s", diff)
	}
}
