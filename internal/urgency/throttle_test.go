package urgency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TestThrottle runs requests through a throttle that refills one token in
// 1,000 s, so that whether a request waited is told by its outcome, not by a
// clock: a routine request that finds the bucket empty gives up at once on a
// context that ends sooner than the wait (x/time/rate knows the wait ahead),
// one that does not wait succeeds.
func TestThrottle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()

	cfg := &rest.Config{Host: srv.URL, QPS: 500, Burst: 1000}
	Throttle(cfg, 0.001, 1)
	if cfg.QPS >= 0 || cfg.RateLimiter != nil {
		t.Fatalf("QPS %v, RateLimiter %v: want client-go's own limiter off (negative QPS, none set)", cfg.QPS, cfg.RateLimiter)
	}
	rc := *cfg
	rc.APIPath, rc.GroupVersion, rc.NegotiatedSerializer = "/api", &corev1.SchemeGroupVersion, scheme.Codecs.WithoutConversion()
	c, err := rest.RESTClientFor(&rc)
	if err != nil {
		t.Fatal(err)
	}
	if c.GetRateLimiter() != nil {
		t.Errorf("a client built from the config has client-go's limiter too")
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	do := func(ctx context.Context, method, path string) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	const cm = "/api/v1/namespaces/a/configmaps/c"
	steps := []struct {
		what         string
		urgent       bool
		method, path string
		wait         bool // whether it finds the bucket empty and must wait
	}{
		{what: "the first routine request takes the burst", method: http.MethodGet, path: cm},
		{what: "a routine request of the same resource", method: http.MethodGet, path: cm, wait: true},
		{what: "one of its subresource", method: http.MethodPut, path: cm + "/status", wait: true},
		{what: "an urgent request", urgent: true, method: http.MethodGet, path: cm},
		{what: "a watch", method: http.MethodGet, path: "/api/v1/namespaces/a/configmaps?watch=true"},
		{what: "a lease renewal", method: http.MethodPut, path: "/apis/coordination.k8s.io/v1/namespaces/a/leases/l"},
		{what: "a routine request of another resource", method: http.MethodGet, path: "/apis/apps/v1/namespaces/a/deployments/d"},
		{what: "a second one of that resource", method: http.MethodGet, path: "/apis/apps/v1/namespaces/a/deployments/d", wait: true},
	}
	for _, s := range steps {
		ctx := context.Background()
		if s.urgent {
			ctx = WithUrgent(ctx)
		}
		err := do(ctx, s.method, s.path)
		if s.wait && err == nil {
			t.Errorf("%s: sent at once, want it to wait for a token", s.what)
		}
		if !s.wait && err != nil {
			t.Errorf("%s: %v, want it sent at once", s.what, err)
		}
	}
}

// TestThrottleOff: no rate sets no limit, client-go's default of 5 a second
// included.
func TestThrottleOff(t *testing.T) {
	cfg := &rest.Config{QPS: 5, Burst: 10}
	Throttle(cfg, 0, 0)
	if cfg.QPS >= 0 || cfg.RateLimiter != nil || cfg.WrapTransport != nil {
		t.Errorf("QPS %v, RateLimiter %v, transport wrapped %t: want no limit", cfg.QPS, cfg.RateLimiter, cfg.WrapTransport != nil)
	}
}
