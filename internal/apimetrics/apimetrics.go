// Package apimetrics counts what the provider asks of the API servers it
// talks to, by verb and resource, and the watches it holds open. client-go's
// own metrics count requests by method and host only, which cannot tell a
// fleet's status writes from its reads of the objects it acts on; these can,
// so a platform team (and make bench-fleet) sees what each kind costs.
package apimetrics

import (
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// counters are the request metrics of one registry.
type counters struct {
	requests, opened *prometheus.CounterVec
	watches          *prometheus.GaugeVec
}

// newCounters registers the request metrics with reg, or takes those
// already registered there: a test process builds several providers into
// one registry, and a sharded replica builds its lead manager again.
func newCounters(reg prometheus.Registerer) (*counters, error) {
	c := &counters{}
	var err error
	if c.requests, err = Existing(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clusterops_api_requests_total",
		Help: "Requests the provider sent to API servers, by Kubernetes verb and resource (with subresource).",
	}, []string{"verb", "resource"})); err != nil {
		return nil, errors.Wrap(err, errRegister)
	}
	if c.watches, err = Existing(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clusterops_api_watches",
		Help: "Watch streams the provider holds open on API servers, by resource.",
	}, []string{"resource"})); err != nil {
		return nil, errors.Wrap(err, errRegister)
	}
	if c.opened, err = Existing(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clusterops_api_watches_opened_total",
		Help: "Watch streams the provider opened on API servers, by resource. Beyond the watches held, each is a watch resumed or a relist; a refused watch request (an API server still starting answers 429) opens none.",
	}, []string{"resource"})); err != nil {
		return nil, errors.Wrap(err, errRegister)
	}
	return c, nil
}

const errRegister = "cannot register API request metrics"

// Instrument makes every client built from cfg, or from a copy of it, count
// its requests in the request metrics of reg.
func Instrument(cfg *rest.Config, reg prometheus.Registerer) error {
	c, err := newCounters(reg)
	if err != nil {
		return err
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counting{next: rt, counters: c} })
	return nil
}

type counting struct {
	next http.RoundTripper
	*counters
}

func (c counting) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := Classify(req.Method, req.URL.Path, req.URL.Query().Get("watch"))
	c.requests.WithLabelValues(verb, resource).Inc()
	resp, err := c.next.RoundTrip(req)
	if err != nil || verb != "watch" || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	c.opened.WithLabelValues(resource).Inc()
	g := c.watches.WithLabelValues(resource)
	g.Inc()
	resp.Body = &closing{ReadCloser: resp.Body, done: g.Dec}
	return resp, nil
}

// closing runs done once, when the watch's body is closed.
type closing struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (c *closing) Close() error {
	c.once.Do(c.done)
	return c.ReadCloser.Close()
}

// Classify names a request's Kubernetes verb and resource from its method and
// path, as the API server's request info does: "get" of "deployments",
// "update" of "configrollouts/status", "watch" of "configmaps". A path that
// is not a resource (discovery, /healthz) is the verb of its method and the
// resource "-".
func Classify(method, path, watch string) (verb, resource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(method), "-"
	}
	// namespaces/<ns>/<resource>... except the namespaces themselves.
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 || parts[0] == "" {
		return strings.ToLower(method), "-"
	}
	resource, named := parts[0], len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case watch == "true" || watch == "1":
			return "watch", resource
		case named:
			return "get", resource
		}
		return "list", resource
	case http.MethodPost:
		return "create", resource
	case http.MethodPut:
		return "update", resource
	case http.MethodPatch:
		return "patch", resource
	case http.MethodDelete:
		if named {
			return "delete", resource
		}
		return "deletecollection", resource
	}
	return strings.ToLower(method), resource
}
