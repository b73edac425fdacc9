package testenv

import (
	"net/http"
	"strings"
	"sync"
)

// A RequestLog records the requests the in-process provider sends to the API
// server, so tests can assert that a converged managed resource writes nothing
// and reads little.
type RequestLog struct {
	mu       sync.Mutex
	requests []string // "METHOD path?query"
}

type logTransport struct {
	log  *RequestLog
	next http.RoundTripper
}

func (t *logTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	line := r.Method + " " + r.URL.Path
	if r.URL.RawQuery != "" {
		line += "?" + r.URL.RawQuery
	}
	t.log.mu.Lock()
	t.log.requests = append(t.log.requests, line)
	t.log.mu.Unlock()
	return t.next.RoundTrip(r)
}

// Writes returns the writes so far whose path contains every one of parts,
// such as "/namespaces/team-a/configmaps".
func (l *RequestLog) Writes(parts ...string) []string {
	return l.match(func(r string) bool { return !strings.HasPrefix(r, http.MethodGet+" ") }, parts)
}

// All returns every request so far, reads and watches included, whose
// "METHOD path?query" contains every one of parts.
func (l *RequestLog) All(parts ...string) []string {
	return l.match(func(string) bool { return true }, parts)
}

// Len is the number of requests so far: All()[Len():] are the ones after.
func (l *RequestLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.requests)
}

// Since returns the requests after the first n.
func (l *RequestLog) Since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.requests[min(n, len(l.requests)):]...)
}

func (l *RequestLog) match(keep func(string) bool, parts []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.requests {
		all := keep(r)
		for _, p := range parts {
			all = all && strings.Contains(r, p)
		}
		if all {
			out = append(out, r)
		}
	}
	return out
}
