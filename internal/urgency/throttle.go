package urgency

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"

	"github.com/clusterops/provider-clusterops/internal/apimetrics"
)

var throttled = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "clusterops_api_throttled_seconds",
	Help:    "How long routine API requests waited for the provider's client-side rate limit (--client-qps per resource); requests of reconciles a change caused, watches and lease renewals never wait for it.",
	Buckets: []float64{0.01, 0.1, 1, 10},
})

// RegisterThrottle adds the throttle's metric to r.
func RegisterThrottle(r prometheus.Registerer) error {
	return register(r, throttled)
}

// Throttle limits the requests of every client built from cfg, or from a copy
// of it, to qps a second per resource with the given burst, in place of
// client-go's own limiter, which it turns off: qps <= 0 sets no limit at all.
// client-go's limiter makes every request wait its turn, so a fleet's routine
// requests, up to a second's worth of them, queued ahead of the few of a
// reconcile a change caused, which then reacted seconds late. Here a request
// that is not routine (an urgent reconcile's, a watch, a lease's) takes its
// token without waiting, ahead of the routine requests waiting, which wait
// that much longer: the rate over time is the same.
func Throttle(cfg *rest.Config, qps float32, burst int) {
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	if qps <= 0 {
		return
	}
	t := &throttle{limit: rate.Limit(qps), burst: max(burst, 1), by: map[string]*rate.Limiter{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return throttledTransport{t: t, next: rt} })
}

type throttle struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	by    map[string]*rate.Limiter // by resource, its subresources included
}

func (t *throttle) limiter(req *http.Request) *rate.Limiter {
	_, res := apimetrics.Classify(req.Method, req.URL.Path, req.URL.Query().Get("watch"))
	res, _, _ = strings.Cut(res, "/")
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.by[res]
	if !ok {
		l = rate.NewLimiter(t.limit, t.burst)
		t.by[res] = l
	}
	return l
}

type throttledTransport struct {
	t    *throttle
	next http.RoundTripper
}

func (tt throttledTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	l := tt.t.limiter(req)
	if !Routine(req) {
		// Taken now, whatever the wait: the routine requests after it wait.
		l.Reserve()
		return tt.next.RoundTrip(req)
	}
	start := time.Now()
	if err := l.Wait(req.Context()); err != nil {
		return nil, err
	}
	if d := time.Since(start); d >= time.Millisecond {
		throttled.Observe(d.Seconds())
	}
	return tt.next.RoundTrip(req)
}
