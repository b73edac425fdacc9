package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clusterops/provider-clusterops/internal/testenv"
	"github.com/clusterops/provider-clusterops/internal/whole"
)

// gate is a source that has synced once release is closed.
type gate struct{ release chan struct{} }

func (g gate) Start(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return nil
}

func (g gate) WaitForSync(ctx context.Context) error {
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	return nil
}

// preempted is a manager whose builder is held up once it has added its
// controller, as a setup is on a busy machine, before it registers the
// controller's watches.
type preempted struct {
	ctrl.Manager
	added, held bool
}

func (p *preempted) Add(r manager.Runnable) error {
	p.added = true
	return p.Manager.Add(r)
}

func (p *preempted) GetCache() cache.Cache {
	if p.added && !p.held {
		p.held = true
		time.Sleep(300 * time.Millisecond)
	}
	return p.Manager.GetCache()
}

// TestControllerAddedToARunningManagerWaits: a kind's controller is built
// once its CRD appears, on a manager that already runs. Its workers must not
// run until every watch the builder registers has synced. Built by
// controller-runtime's builder alone, the controller may start as soon as it
// is added, before its watches, which then start unwaited for: a restarted
// provider's first reconciles run before the workload watch's first list,
// which queues them again (TestConfigRolloutAutoRestartReadsEachWorkloadOnce).
func TestControllerAddedToARunningManagerWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t, "whole", nil)
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     clientgoscheme.Scheme,
		Metrics:    server.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Background(t, mgr.Start)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the manager's cache did not sync")
	}

	var mu sync.Mutex
	var first time.Time
	r := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = time.Now()
		}
		return reconcile.Result{}, nil
	})
	g := gate{release: make(chan struct{})}
	err = whole.Controller(mgr, func(mgr ctrl.Manager) error {
		return ctrl.NewControllerManagedBy(&preempted{Manager: mgr}).
			Named("whole").
			For(&corev1.ConfigMap{}).
			WatchesRawSource(g).
			Complete(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	released := time.Now()
	close(g.release)
	deadline := time.Now().Add(wait)
	for {
		mu.Lock()
		f := first
		mu.Unlock()
		if !f.IsZero() {
			if f.Before(released) {
				t.Errorf("the controller reconciled %s before its last watch synced, want after", released.Sub(f))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the controller never reconciled the ConfigMap")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
