package apimetrics

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
)

func TestClassifyNamesVerbAndResource(t *testing.T) {
	cases := []struct {
		method, path, watch string
		verb, resource      string
	}{
		{http.MethodGet, "/api/v1/namespaces/a/configmaps/x", "", "get", "configmaps"},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps", "", "list", "configmaps"},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps", "true", "watch", "configmaps"},
		{http.MethodGet, "/api/v1/configmaps", "1", "watch", "configmaps"},
		{http.MethodGet, "/api/v1/namespaces", "", "list", "namespaces"},
		{http.MethodGet, "/api/v1/namespaces/a", "", "get", "namespaces"},
		{http.MethodPut, "/apis/workload.clusterops.io/v1alpha1/namespaces/a/configrollouts/r/status", "", "update", "configrollouts/status"},
		{http.MethodPatch, "/apis/apps/v1/namespaces/a/deployments/web", "", "patch", "deployments"},
		{http.MethodPost, "/api/v1/namespaces/a/pods", "", "create", "pods"},
		{http.MethodPost, "/api/v1/namespaces/a/pods/p/eviction", "", "create", "pods/eviction"},
		{http.MethodDelete, "/api/v1/namespaces/a/pods/p", "", "delete", "pods"},
		{http.MethodDelete, "/api/v1/namespaces/a/pods", "", "deletecollection", "pods"},
		{http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/s/leases/l", "", "get", "leases"},
		{http.MethodGet, "/apis", "", "get", "-"},
		{http.MethodGet, "/api/v1", "", "get", "-"},
		{http.MethodGet, "/healthz", "", "get", "-"},
	}
	for _, c := range cases {
		verb, res := Classify(c.method, c.path, c.watch)
		if verb != c.verb || res != c.resource {
			t.Errorf("Classify(%s %s watch=%q) = %s %s, want %s %s", c.method, c.path, c.watch, verb, res, c.verb, c.resource)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("GET", "/api/v1/namespaces/a/configmaps/x", "")
	f.Add("PATCH", "/apis/apps/v1/namespaces/a/deployments/web/status", "true")
	f.Fuzz(func(t *testing.T, method, path, watch string) {
		verb, res := Classify(method, path, watch)
		if verb == "" && method != "" || res == "" {
			t.Fatalf("Classify(%q, %q, %q) = %q, %q", method, path, watch, verb, res)
		}
	})
}

func TestInstrumentRegistersOnceInEachRegistry(t *testing.T) {
	cases := map[string]struct {
		reason  string
		already func(reg prometheus.Registerer) error
		wantErr bool
	}{
		"Fresh": {
			reason:  "The metrics register in a registry that has none of them.",
			already: func(prometheus.Registerer) error { return nil },
		},
		"Again": {
			reason:  "A second provider in the process registers them again: not an error.",
			already: func(reg prometheus.Registerer) error { return Instrument(&rest.Config{}, reg) },
		},
		"Conflicting": {
			reason: "Other metrics of the same name are an error.",
			already: func(reg prometheus.Registerer) error {
				return reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "clusterops_api_requests_total", Help: "Something else."}))
			},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			if err := tc.already(reg); err != nil {
				t.Fatal(err)
			}
			err := Instrument(&rest.Config{}, reg)
			if diff := cmp.Diff(tc.wantErr, err != nil); diff != "" {
				t.Errorf("\n%s\nInstrument(...): error %v: -want error, +got error:\n%s", tc.reason, err, diff)
			}
		})
	}
}

type answer int

func (a answer) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: int(a), Body: io.NopCloser(strings.NewReader(""))}, nil
}

func TestCountingWatches(t *testing.T) {
	const res = "apimetricstests"
	c, err := newCounters(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	watch := func(code int) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, "https://api/apis/example.org/v1/"+res+"?watch=true", nil)
		resp, err := counting{next: answer(code), counters: c}.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// A starting API server refuses a watch twice, then opens it: three
	// requests, one stream opened and held until its body is closed.
	watch(http.StatusTooManyRequests)
	watch(http.StatusTooManyRequests)
	resp := watch(http.StatusOK)
	got := func() []float64 {
		return []float64{
			testutil.ToFloat64(c.requests.WithLabelValues("watch", res)),
			testutil.ToFloat64(c.opened.WithLabelValues(res)),
			testutil.ToFloat64(c.watches.WithLabelValues(res)),
		}
	}
	if diff := cmp.Diff([]float64{3, 1, 1}, got()); diff != "" {
		t.Errorf("requests, opened, held while open: -want, +got:\n%s", diff)
	}
	_ = resp.Body.Close()
	_ = resp.Body.Close()
	if diff := cmp.Diff([]float64{3, 1, 0}, got()); diff != "" {
		t.Errorf("requests, opened, held once closed twice: -want, +got:\n%s", diff)
	}
}
