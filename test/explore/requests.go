package explore

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A requestLog records every request the fleet's replicas send to act in a
// world's namespaces: the explorer's audit log, each replica under its own
// identity. A freeze of a denied namespace reads it for any request, read
// or write, sent there after it armed. What the provider writes of its own
// managed resources and Events about them is bookkeeping, not acting, and
// is left out.
type requestLog struct {
	prefix string
	mu     sync.Mutex
	reqs   []request
}

// A request is one request a replica sent into a namespace.
type request struct {
	at        time.Time
	replica   string
	namespace string
	verb      string
	path      string
}

func (r request) String() string {
	return fmt.Sprintf("%s %s by %s at %s", r.verb, r.path, r.replica, r.at.Format("15:04:05.000"))
}

// namespaceOf is the namespace a request path acts in, when it names one
// and something in it: /api/v1/namespaces/<ns>/configmaps/x is in <ns>;
// /api/v1/namespaces/<ns>, the Namespace itself, is in none.
func namespaceOf(path string) string {
	_, rest, ok := strings.Cut(path, "/namespaces/")
	if !ok {
		return ""
	}
	ns, more, ok := strings.Cut(rest, "/")
	if !ok || more == "" {
		return ""
	}
	return ns
}

// ownBook says whether a request path is the provider's bookkeeping rather
// than acting in a namespace: its own managed resources and their
// ProviderConfigUsages (a clusterops.io group), whose status and finalizers
// it writes wherever they live, and Events, which it records about them.
func ownBook(path string) bool {
	if strings.HasPrefix(path, "/apis/") {
		group, _, _ := strings.Cut(strings.TrimPrefix(path, "/apis/"), "/")
		if group == "clusterops.io" || strings.HasSuffix(group, ".clusterops.io") || group == "events.k8s.io" {
			return true
		}
	}
	_, rest, _ := strings.Cut(path, "/namespaces/")
	_, res, _ := strings.Cut(rest, "/")
	return res == "events" || strings.HasPrefix(res, "events/")
}

// record notes req of replica when it goes into one of the world's
// namespaces to act there.
func (l *requestLog) record(replica string, req *http.Request) {
	ns := namespaceOf(req.URL.Path)
	if !strings.HasPrefix(ns, l.prefix) || ownBook(req.URL.Path) {
		return
	}
	verb := req.Method
	if req.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, request{at: time.Now(), replica: replica, namespace: ns, verb: verb, path: req.URL.Path})
}

// since are the requests into ns sent at or after t.
func (l *requestLog) since(ns string, t time.Time) []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []request
	for _, r := range l.reqs {
		if r.namespace == ns && !r.at.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

// recording is a round tripper that records each request in a log.
type recording struct {
	next    http.RoundTripper
	log     *requestLog
	replica string
}

func (r recording) RoundTrip(req *http.Request) (*http.Response, error) {
	r.log.record(r.replica, req)
	return r.next.RoundTrip(req)
}
