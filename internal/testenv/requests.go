package testenv

import (
	"net/http"
	"strings"
	"sync"
)

// A RequestLog records the writes the in-process provider sends to the API
// server, so tests can assert that a converged managed resource writes nothing.
type RequestLog struct {
	mu     sync.Mutex
	writes []string // "METHOD path"
}

type logTransport struct {
	log  *RequestLog
	next http.RoundTripper
}

func (t *logTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		t.log.mu.Lock()
		t.log.writes = append(t.log.writes, r.Method+" "+r.URL.Path)
		t.log.mu.Unlock()
	}
	return t.next.RoundTrip(r)
}

// Writes returns the writes so far whose path contains every one of parts,
// such as "/namespaces/team-a/configmaps".
func (l *RequestLog) Writes(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, w := range l.writes {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(w, p)
		}
		if all {
			out = append(out, w)
		}
	}
	return out
}
