// Package leastprivilege runs the provider as a ServiceAccount bound to
// exactly the RBAC this repository ships (cluster/rbac/provider-rbac.yaml and
// examples/provider/rbac.yaml), not as cluster-admin, through every kind, and
// checks that no request it makes is forbidden; a sharded replica
// (sharded_test.go) too, and one bound to less, which must say so.
package leastprivilege

import (
	"context"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

// forbidden records every request of the provider the API server refused.
var forbidden = &refusals{}

// poll is far longer than any test: what a test sees happen, a watch made happen.
const poll = time.Hour

// wait is how long a test waits for the provider to react, generously: the
// machine may be loaded.
const wait = 60 * time.Second

// The provider's identity: the ServiceAccount the RBAC binds.
const (
	saNamespace = testenv.ProviderSANamespace
	saName      = testenv.ProviderSAName
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, poll, func(e *testenv.Env) { env = e }, func(ctx context.Context) error {
		if err := testenv.ApplyShippedRBAC(ctx, env.Client); err != nil {
			return err
		}
		cfg := testenv.AsProvider(env.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &refusalTransport{log: forbidden, next: rt} })
		env.ProviderConfig = cfg
		return nil
	}))
}

// refusals are requests the API server answered 403 Forbidden.
type refusals struct {
	mu  sync.Mutex
	req []string
}

func (r *refusals) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.req...)
}

type refusalTransport struct {
	log  *refusals
	next http.RoundTripper
}

func (t *refusalTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		t.log.mu.Lock()
		t.log.req = append(t.log.req, r.Method+" "+r.URL.Path)
		t.log.mu.Unlock()
	}
	return resp, err
}
