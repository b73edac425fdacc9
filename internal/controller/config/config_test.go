package config

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

func TestUsageEventsDebounced(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := debounced{EventHandler: &handler.EnqueueRequestForObject{}, after: 200 * time.Millisecond}
	cfg := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	// A fleet's usages are created in a burst: one count follows it.
	for range 100 {
		h.Create(context.Background(), ctrlevent.CreateEvent{Object: cfg}, q)
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("queued at once: %d, want 0 until the usages settle", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if n := q.Len(); n != 1 {
		t.Errorf("queued after the burst: %d, want 1", n)
	}
}

func TestCountsAgain(t *testing.T) {
	now := metav1.Now()
	base := func() *v1alpha1.ClusterProviderConfig {
		return &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1, Finalizers: []string{"in-use"}}}
	}
	cases := map[string]struct {
		reason string
		change func(c *v1alpha1.ClusterProviderConfig)
		want   bool
	}{
		"Status": {
			reason: "Its own count's write does not start another count.",
			change: func(c *v1alpha1.ClusterProviderConfig) { c.Status.Users = 7; c.ResourceVersion = "2" },
		},
		"Spec":      {reason: "A new spec is counted again.", change: func(c *v1alpha1.ClusterProviderConfig) { c.Generation = 2 }, want: true},
		"Deleted":   {reason: "A deletion is counted again, to block it or let it go.", change: func(c *v1alpha1.ClusterProviderConfig) { c.DeletionTimestamp = &now }, want: true},
		"Finalizer": {reason: "A finalizer removed is put back.", change: func(c *v1alpha1.ClusterProviderConfig) { c.Finalizers = nil }, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := base()
			tc.change(n)
			if got := countsAgain(ctrlevent.UpdateEvent{ObjectOld: base(), ObjectNew: n}); got != tc.want {
				t.Errorf("\n%s\ncountsAgain(...): want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
}
