package target

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Bounds on a remote cluster that stops answering. A request still waiting
// after stallAfter, when nothing else the cluster answered since it began,
// has the cluster probed; when the probe gets no answer either, or a request
// none within requestTimeout, the cluster is unreachable: the requests
// waiting for it are cancelled, and managed resources acting on it fail at
// once in Connect, with the reason, instead of each holding a worker until
// its own request times out, so that a dark cluster does not slow the rest of
// the fleet. A managed resource that retries probes it again, one at a time
// and at most once every probeEvery, so that the first retry after the
// cluster is back finds it; any answer ends the outage. A slow request on a
// cluster that answers its probe goes on.
const (
	stallAfter     = 3 * time.Second
	requestTimeout = 15 * time.Second
	probeTimeout   = 3 * time.Second
	probeEvery     = time.Second
)

// An Unreachable cluster is one whose API server did not answer.
type Unreachable struct {
	Cluster string
	Since   time.Time
	Cause   string
}

func (u *Unreachable) Error() string {
	return fmt.Sprintf("cluster %s has been unreachable since %s: %s; retrying", u.Cluster, u.Since.UTC().Format(time.RFC3339), u.Cause)
}

// health is what the provider knows of a remote cluster's API server: whether
// its last request got an answer. It is shared by every client and watch of
// the cluster (one transport), so one outage is learnt once for the fleet.
type health struct {
	name string
	now  func() time.Time
	// probe asks the API server for an answer; set before the first request.
	probe func(context.Context) error
	// stall is stallAfter but in tests.
	stall time.Duration
	// back, when set, is told (on a goroutine of its own) each time the
	// cluster answers again after an outage.
	back func()

	mu         sync.Mutex
	lastAnswer time.Time
	suspecting bool
	down       *Unreachable
	nextProbe  time.Time
	probing    bool
	// inflight cancels the requests waiting for an answer when the cluster
	// is found unreachable: they would only wait for their own timeouts.
	inflight map[int]context.CancelFunc
	seq      int
}

func newHealth(name string, now func() time.Time) *health {
	return &health{name: name, now: now, stall: stallAfter, inflight: map[int]context.CancelFunc{}}
}

// wrap bounds every request but watches by requestTimeout and records whether
// each got an answer. A request its caller cancelled says nothing of the
// cluster.
func (h *health) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") == "true" {
			resp, err := rt.RoundTrip(req)
			h.answered(req.Context(), err)
			return resp, err
		}
		ctx, cancel := context.WithTimeout(req.Context(), requestTimeout)
		id := h.track(cancel)
		began := h.now()
		stall := time.AfterFunc(h.stall, func() { h.suspect(began) })
		resp, err := rt.RoundTrip(req.WithContext(ctx))
		stall.Stop()
		h.untrack(id)
		h.answered(req.Context(), err)
		if err != nil {
			cancel()
			return nil, err
		}
		// The body is read after RoundTrip returns: the context lives until
		// it is closed.
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		return resp, nil
	})
}

// answered records a request's outcome: any response means the API server is
// there; a transport error means it is not, unless the caller gave up.
func (h *health) answered(caller context.Context, err error) {
	if err != nil && caller.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.up()
		h.lastAnswer = h.now()
		return
	}
	h.trip(err.Error())
}

// up ends an outage, if there is one, and says so. h.mu is held.
func (h *health) up() {
	if h.down != nil && h.back != nil {
		go h.back()
	}
	h.down = nil
}

// suspect probes the cluster for a request that has waited stallAfter since
// began, unless the cluster answered something since or a probe runs.
func (h *health) suspect(began time.Time) {
	h.mu.Lock()
	if h.down != nil || h.suspecting || h.lastAnswer.After(began) || h.probe == nil {
		h.mu.Unlock()
		return
	}
	h.suspecting = true
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	err := h.probe(ctx)
	cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.suspecting = false
	if err != nil && !h.lastAnswer.After(began) {
		h.trip(fmt.Sprintf("no answer within %s: %v", h.stall+probeTimeout, err))
	}
}

// trip records the start of an outage, once, and cancels the requests that
// wait for the cluster. h.mu is held.
func (h *health) trip(cause string) {
	if h.down != nil {
		return
	}
	h.down = &Unreachable{Cluster: h.name, Since: h.now(), Cause: cause}
	h.nextProbe = h.now().Add(probeEvery)
	for id, cancel := range h.inflight {
		cancel()
		delete(h.inflight, id)
	}
}

// check returns nil when the cluster is taken to answer, and otherwise the
// outage, after probing it when a probe is due and no other caller probes.
func (h *health) check(ctx context.Context) error {
	h.mu.Lock()
	if h.down == nil {
		h.mu.Unlock()
		return nil
	}
	if h.probing || h.now().Before(h.nextProbe) {
		u := *h.down
		h.mu.Unlock()
		return &u
	}
	h.probing = true
	h.mu.Unlock()

	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	err := h.probe(pctx)
	cancel()

	h.mu.Lock()
	defer h.mu.Unlock()
	h.probing = false
	if err == nil {
		h.up()
		return nil
	}
	if h.down == nil {
		// A request answered while the probe did not.
		return nil
	}
	// The cause stays the first one: a message that changed with every
	// probe would be a status write each time.
	h.nextProbe = h.now().Add(probeEvery)
	u := *h.down
	return &u
}

func (h *health) track(cancel context.CancelFunc) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	h.inflight[h.seq] = cancel
	return h.seq
}

func (h *health) untrack(id int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.inflight, id)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}
