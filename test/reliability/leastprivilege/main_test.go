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
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

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
	saNamespace = "crossplane-system"
	saName      = "provider-clusterops"
)

// rbacFiles are the RBAC this repository ships, and which kinds of each
// are applied: the DeploymentRuntimeConfig needs Crossplane.
var rbacFiles = map[string][]string{
	filepath.Join("cluster", "rbac", "provider-rbac.yaml"): {"ClusterRole", "ClusterRoleBinding"},
	filepath.Join("examples", "provider", "rbac.yaml"):     {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"},
}

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, poll, func(e *testenv.Env) { env = e }, func(ctx context.Context) error {
		if err := setup(ctx); err != nil {
			return err
		}
		cfg := serviceAccountConfig()
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &refusalTransport{log: forbidden, next: rt} })
		env.ProviderConfig = cfg
		return nil
	}))
}

// setup applies the shipped RBAC as an administrator would.
func setup(ctx context.Context) error {
	for f, kinds := range rbacFiles {
		objs, err := testenv.ReadObjects(filepath.Join(testenv.RepoRoot(), f))
		if err != nil {
			return err
		}
		for _, o := range objs {
			if !contains(kinds, o.GetKind()) {
				continue
			}
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("admin"), client.ForceOwnership); err != nil {
				return errors.Wrapf(err, "cannot apply %s %q from %s", o.GetKind(), o.GetName(), f)
			}
		}
	}
	return nil
}

// serviceAccountConfig authenticates as the admin and impersonates the
// provider's ServiceAccount, with the groups a token of it would carry.
func serviceAccountConfig() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + saNamespace + ":" + saName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"},
	}
	return cfg
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
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
