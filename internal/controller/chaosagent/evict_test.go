package chaosagent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/clusterops/provider-clusterops/internal/shard"
)

// TestEvictAsksTheFence: an eviction, sent around the fenced client, is not
// sent for a shard whose Lease the replica does not hold.
func TestEvictAsksTheFence(t *testing.T) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sent.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "victim", UID: "u"}}
	fenced := shard.WritingFor(shard.WithFence(context.Background(), shard.NewFence("p", "me", time.Minute)), "3")
	if err := evict(fenced, &rest.Config{Host: srv.URL}, pod); err == nil || sent.Load() != 0 {
		t.Errorf("evict past the fence: %v, %d requests sent; want an error and none", err, sent.Load())
	}
	if err := evict(context.Background(), &rest.Config{Host: srv.URL}, pod); err != nil || sent.Load() != 1 {
		t.Errorf("evict without sharding: %v, %d requests sent; want it sent once", err, sent.Load())
	}
}
