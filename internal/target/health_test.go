package target

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// clock is a settable now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func get(t *testing.T, rt http.RoundTripper, url string) error {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func TestHealthReportsAnUnreachableCluster(t *testing.T) {
	c := &clock{t: time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)}
	h := newHealth("ClusterProviderConfig far", c.now)
	fail := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	up := true
	rt := h.wrap(roundTripper(func(*http.Request) (*http.Response, error) {
		if !up {
			return nil, fail
		}
		return &http.Response{StatusCode: http.StatusForbidden, Body: io.NopCloser(strings.NewReader(""))}, nil
	}))
	probes := 0
	h.probe = func(context.Context) error {
		probes++
		if up {
			return nil
		}
		return fail
	}
	ctx := context.Background()

	// Any answer, an error status too, is the API server being there.
	if err := get(t, rt, "https://far/api/v1/namespaces"); err != nil || h.check(ctx) != nil {
		t.Fatalf("answered: request %v, check %v; want both nil", err, h.check(ctx))
	}
	// No answer: unreachable since now, with the cause, without a probe.
	up = false
	_ = get(t, rt, "https://far/api/v1/namespaces")
	err := h.check(ctx)
	var u *Unreachable
	if !errors.As(err, &u) || !u.Since.Equal(c.t) || probes != 0 {
		t.Fatalf("after a failed request: check = %v, %d probes; want Unreachable since %s and no probe", err, probes, c.t)
	}
	want := "cluster ClusterProviderConfig far has been unreachable since 2026-03-02T12:00:00Z: " + fail.Error() + "; retrying"
	if err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	// Retries probe one at a time, at most once a second.
	for range 3 {
		before := probes
		c.t = c.t.Add(probeEvery - time.Millisecond)
		if h.check(ctx) == nil || probes != before {
			t.Fatal("probed within a second of the last probe")
		}
		c.t = c.t.Add(time.Millisecond)
		if h.check(ctx) == nil || probes != before+1 {
			t.Fatalf("a second after the last probe: want one more failed probe, got %d", probes-before)
		}
	}
	// The cluster answers again: the next due probe ends the outage.
	up = true
	c.t = c.t.Add(probeEvery)
	if err := h.check(ctx); err != nil {
		t.Fatalf("after the cluster came back: %v", err)
	}
	// An answer to any request ends an outage too, probe or not.
	up = false
	_ = get(t, rt, "https://far/api")
	up = true
	_ = get(t, rt, "https://far/api?watch=true")
	if err := h.check(ctx); err != nil {
		t.Fatalf("after a watch was answered: %v", err)
	}
}

// A request its caller gave up on says nothing of the cluster.
func TestHealthIgnoresCallersCancel(t *testing.T) {
	h := newHealth("far", time.Now)
	rt := h.wrap(roundTripper(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://far/api", nil)
	cancel()
	_, _ = rt.RoundTrip(req) //nolint:bodyclose // No response: the request was cancelled.
	h.probe = func(context.Context) error { return nil }
	if err := h.check(context.Background()); err != nil {
		t.Errorf("a cancelled request made the cluster unreachable: %v", err)
	}
}

// When the cluster is found unreachable, the requests still waiting for it
// are cancelled: they hold workers for nothing.
func TestHealthCancelsWaitingRequests(t *testing.T) {
	h := newHealth("far", time.Now)
	release := make(chan struct{})
	rt := h.wrap(roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/fail" {
			<-release
			return nil, errors.New("i/o timeout")
		}
		<-r.Context().Done()
		return nil, r.Context().Err()
	}))
	waiting := make(chan error)
	go func() { waiting <- get(t, rt, "https://far/hang") }()
	go func() { _ = get(t, rt, "https://far/fail") }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	select {
	case err := <-waiting:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the waiting request ended with %v, want it cancelled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting request was not cancelled when the cluster was found unreachable")
	}
}

// The prober reads /readyz of the server the config names.
func TestProberReadsReadyzOfTheConfiguredServer(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	probe, err := prober(&rest.Config{Host: srv.URL + "/prefix/"})
	if err != nil {
		t.Fatal(err)
	}
	if err := probe(context.Background()); err != nil || path != "/prefix/readyz" {
		t.Errorf("probe() = %v at %q, want nil at /prefix/readyz", err, path)
	}
	srv.Close()
	if err := probe(context.Background()); err == nil {
		t.Error("probe() of a closed server = nil, want an error")
	}
}

// A request that waits with nothing else answered has the cluster probed:
// when the probe gets no answer either, the cluster is unreachable and the
// request is cancelled; when it does, the slow request goes on.
func TestHealthStall(t *testing.T) {
	for name, probeErr := range map[string]error{"Dark": errors.New("i/o timeout"), "Slow": nil} {
		t.Run(name, func(t *testing.T) {
			h := newHealth("far", time.Now)
			h.stall = 20 * time.Millisecond
			h.probe = func(context.Context) error {
				if probeErr == nil {
					h.answered(context.Background(), nil)
				}
				return probeErr
			}
			done := make(chan struct{})
			rt := h.wrap(roundTripper(func(r *http.Request) (*http.Response, error) {
				select {
				case <-r.Context().Done():
					return nil, r.Context().Err()
				case <-done:
					return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(""))}, nil
				}
			}))
			result := make(chan error, 1)
			go func() { result <- get(t, rt, "https://far/api/v1/configmaps") }()
			if probeErr == nil {
				time.Sleep(200 * time.Millisecond)
				close(done)
			}
			err := <-result
			dark := h.check(context.Background()) != nil
			if probeErr != nil && (!dark || !errors.Is(err, context.Canceled)) {
				t.Errorf("dark cluster: request ended with %v, unreachable %t; want cancelled and unreachable", err, dark)
			}
			if probeErr == nil && (dark || err != nil) {
				t.Errorf("slow cluster: request ended with %v, unreachable %t; want it answered", err, dark)
			}
		})
	}
}

// TestHealthSaysWhenBack: the end of an outage is told once, whether a probe
// or a request finds the cluster again, and an answer without an outage
// tells nothing.
func TestHealthSaysWhenBack(t *testing.T) {
	c := &clock{t: time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)}
	h := newHealth("far", c.now)
	back := make(chan struct{}, 4)
	h.back = func() { back <- struct{}{} }
	up := false
	rt := h.wrap(roundTripper(func(*http.Request) (*http.Response, error) {
		if !up {
			return nil, errors.New("connection refused")
		}
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(""))}, nil
	}))
	h.probe = func(context.Context) error {
		if up {
			return nil
		}
		return errors.New("connection refused")
	}
	told := func(want int) {
		t.Helper()
		got := 0
		for deadline := time.After(time.Second); ; {
			select {
			case <-back:
				got++
				continue
			case <-deadline:
			}
			break
		}
		if got != want {
			t.Errorf("told %d times the cluster is back, want %d", got, want)
		}
	}

	_ = get(t, rt, "https://far/api") // Down.
	up = true
	c.t = c.t.Add(2 * probeEvery) // A probe is due.
	if err := h.check(context.Background()); err != nil {
		t.Fatalf("a probe that got an answer: %v", err)
	}
	told(1)
	_ = get(t, rt, "https://far/api") // Up all along: nothing to tell.
	told(0)
	up = false
	_ = get(t, rt, "https://far/api") // Down again, then a request answers.
	up = true
	_ = get(t, rt, "https://far/api")
	told(1)
}
