package integration

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/internal/flow"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// adaptiveNamespaces is past the watchset's threshold of 64 namespaces, and
// adaptiveFew below half of it.
const (
	adaptiveNamespaces = 80
	adaptiveFew        = 24
)

// TestWatchsetWidensAndNarrows: owners naming a ConfigMap each in more
// namespaces than the watchset's threshold share one wide watch of
// ConfigMaps, and fewer than half of it narrow watches again; while either
// switch runs, every change of a named ConfigMap reaches its owner, and
// goroutines stay within a few informers' worth once wide.
func TestWatchsetWidensAndNarrows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := watchset.New(logging.NewNopLogger())
	go s.Start(ctx) //nolint:errcheck // Start returns nil.
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	fc, err := flow.New(flow.Options{ReconcileRate: 100}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Source(fc).Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	seen := tallied(q)
	c := &target.Cluster{ID: target.LocalID, Config: env.Config}
	cms := corev1.SchemeGroupVersion.WithResource("configmaps")

	owners := make([]types.NamespacedName, adaptiveNamespaces)
	for i := range owners {
		ns := env.Namespace(t, fmt.Sprintf("watchset-adaptive-%d", i), nil)
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}}); err != nil {
			t.Fatal(err)
		}
		owners[i] = types.NamespacedName{Namespace: ns, Name: "owner"}
	}
	before := runtime.NumGoroutine()
	changes := func(n int) {
		t.Helper()
		was := seen.snapshot()
		for _, o := range owners[:n] {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: "conf"}, cm); err != nil {
				t.Fatal(err)
			}
			cm.Data = map[string]string{"at": time.Now().String()}
			if err := env.Client.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
		}
		watchsetWaitFor(t, func() bool {
			now := seen.snapshot()
			for _, o := range owners[:n] {
				if now[o] <= was[o] {
					return false
				}
			}
			return true
		}, "every change reached its owner")
	}

	narrowMost := 0
	for i, o := range owners {
		if err := s.Ensure(o, c, watchset.Watch{Resource: cms, Namespace: o.Namespace, Fields: "metadata.name=conf"}); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.Informers(); n > narrowMost {
			narrowMost = n
		}
		if i%8 == 7 {
			changes(i + 1)
		}
	}
	changes(len(owners))
	watchsetWaitFor(t, func() bool { n, w := s.Informers(); return n == 0 && w == 1 }, "one wide watch of ConfigMaps")
	grown := quietGoroutines() - before
	t.Logf("%d namespaces: at most %d narrow watches on the way; wide: 1 watch, goroutines grew by %d", len(owners), narrowMost, grown)
	if grown > 30 {
		t.Errorf("goroutines grew by %d for one wide watch, want at most 30", grown)
	}

	for i := len(owners) - 1; i >= adaptiveFew; i-- {
		s.Forget(owners[i])
		if i%8 == 0 {
			changes(i)
		}
	}
	changes(adaptiveFew)
	watchsetWaitFor(t, func() bool { n, w := s.Informers(); return n == adaptiveFew && w == 0 }, "narrow watches again")
	changes(adaptiveFew)
	t.Logf("%d namespaces: %d narrow watches, goroutines grew by %d", adaptiveFew, adaptiveFew, quietGoroutines()-before)
}

// watchTally counts the requests a queue receives, per owner.
type watchTally struct {
	mu sync.Mutex
	n  map[types.NamespacedName]int
}

func tallied(q workqueue.TypedRateLimitingInterface[reconcile.Request]) *watchTally {
	t := &watchTally{n: map[types.NamespacedName]int{}}
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

func (t *watchTally) snapshot() map[types.NamespacedName]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[types.NamespacedName]int, len(t.n))
	for o, n := range t.n {
		out[o] = n
	}
	return out
}

func watchsetWaitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(wait); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// quietGoroutines returns the number of goroutines once it stops falling.
func quietGoroutines() int {
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
