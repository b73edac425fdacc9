//go:build bench

// Package bench measures the provider against the local control plane
// (`make bench` starts it): latency of its reactions, throughput of whole
// fleets of managed resources, and what the provider costs while idle, in
// requests and in memory. Benchmarks measure; they never fail on a timing.
//
// The provider runs as its own process (BENCH_PROVIDER, the binary `make
// build` makes) with its default flags unless BENCH_RATE says otherwise, so
// its memory is its own and its requests are counted twice: by its own
// client-go metrics, and by the API server, which sees it as the user
// clusterops-provider through a FlowSchema of its own.
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// providerUser is who the provider acts as: the API server counts its requests
// under this user's FlowSchema. floorUser is the raw client the fan-out
// compares the provider with: a peer with the same standing (a cluster-admin
// binding, impersonated, the same priority level), since the bench's own admin
// skips the authorization and flow control every controller passes through.
const (
	providerUser = "clusterops-provider"
	floorUser    = "clusterops-floor"
)

var (
	env            *testenv.Env
	prov           *providerProcess
	provKubeconfig string // the provider's, written for the run and removed after
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		if err := setUp(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer func() { _ = os.Remove(provKubeconfig) }()
		defer prov.stop()
		defer removeFanOutNamespaces()
		return m.Run()
	}())
}

func setUp() error {
	ctx := context.Background()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS = -1 // The benchmark's own client must not be the bottleneck: no client-side rate limit.
	if env, err = testenv.ForCluster(cfg); err != nil {
		return err
	}
	bin := os.Getenv("BENCH_PROVIDER")
	if bin == "" {
		return fmt.Errorf("BENCH_PROVIDER names no provider binary: run make bench")
	}
	if err := env.InstallCRDs(ctx); err != nil {
		return err
	}
	if _, err := testenv.ApplyFile(ctx, env.Client, filepath.Join(testenv.RepoRoot(), "examples", "providerconfig", "clusterproviderconfig.yaml")); err != nil {
		return err
	}
	for _, u := range []string{providerUser, floorUser} {
		if err := identity(ctx, env.Client, u); err != nil {
			return err
		}
	}
	if provKubeconfig, err = impersonating(providerUser); err != nil {
		return err
	}
	prov, err = startProvider(ctx, bin, provKubeconfig, os.Getenv("BENCH_RATE"))
	return err
}

// impersonating writes a kubeconfig of the bench's cluster that acts as user.
func impersonating(user string) (string, error) {
	path := os.Getenv("KUBECONFIG")
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", err
	}
	for _, a := range raw.AuthInfos {
		a.Impersonate = user
	}
	out := filepath.Join(os.TempDir(), fmt.Sprintf("bench-provider-%d.kubeconfig", time.Now().UnixNano()))
	return out, clientcmd.WriteToFile(*raw, out)
}

// deleteNamespaces deletes what a scenario made, so that runs against a
// control plane that is kept up do not pile them up. It deletes nothing when
// the control plane is discarded after the run (BENCH_DISPOSABLE, set by
// cluster/local/bench.sh when it started it): the namespace controller's
// work of emptying thousands of namespaces would load the API server while
// the next scenarios are measured.
func deleteNamespaces(c client.Client, nss ...string) {
	if disposable() {
		return
	}
	for _, ns := range nss {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
}

// disposable reports whether the control plane is discarded after the run.
func disposable() bool { return os.Getenv("BENCH_DISPOSABLE") != "" }
