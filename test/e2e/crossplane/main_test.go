//go:build e2e

// Package crossplane is the Crossplane end-to-end tier: the real Crossplane core, run out of
// cluster on the local control plane, installs the platform APIs' Configuration package from a
// loopback registry, and with it, as its dependencies, this provider and its composition function
// (multi-platform packages, pulled through their image index), and composes platform APIs from
// examples/ through them. The suite is the External package runtime: it runs the packages'
// binaries on the host.
package crossplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// suite is what TestMain starts for every test.
type suite struct {
	root, logs, kubeconfig string
	crank                  string // The Crossplane CLI.
	registry               string // Host of the loopback registry.
	pulls                  *registryLog
	cfg                    *rest.Config
	c                      client.Client
	pkgs                   map[string]pkg
	core                   *core
	runtime                *externalRuntime
}

var s *suite // Set up once by TestMain.

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctx := context.Background()
	var err error
	s, err = setUp(ctx)
	defer tearDown()
	if err != nil {
		fmt.Fprintf(os.Stderr, "crossplane e2e: %v\n", err)
		return 1
	}
	return m.Run()
}

func setUp(ctx context.Context) (*suite, error) {
	began := time.Now()
	x := &suite{root: testenv.RepoRoot(), kubeconfig: os.Getenv("KUBECONFIG")}
	if x.kubeconfig == "" || !filepath.IsAbs(x.kubeconfig) {
		return x, fmt.Errorf("KUBECONFIG must be an absolute path to the local control plane's kubeconfig; run cluster/local/e2e.sh")
	}
	x.logs = os.Getenv("CROSSPLANE_E2E_LOGS")
	if x.logs == "" {
		x.logs = filepath.Join(x.root, ".cache", "crossplane-e2e-logs")
	}
	_ = os.RemoveAll(x.logs)
	if err := os.MkdirAll(x.logs, 0o700); err != nil {
		return x, err
	}
	work, err := os.MkdirTemp("", "crossplane-e2e-")
	if err != nil {
		return x, err
	}
	if x.cfg, err = clientcmd.BuildConfigFromFlags("", x.kubeconfig); err != nil {
		return x, err
	}
	x.cfg.QPS, x.cfg.Burst = 100, 200
	sch, err := testenv.Scheme()
	if err != nil {
		return x, err
	}
	if x.c, err = client.New(x.cfg, client.Options{Scheme: sch}); err != nil {
		return x, err
	}

	if x.crank, err = toolBinary(x.root, "CRANK_DIR", "crank"); err != nil {
		return x, err
	}
	x.pulls = &registryLog{}
	if x.registry, err = serveRegistry(x.pulls); err != nil {
		return x, err
	}
	if x.pkgs, err = buildPackages(x.root, work, x.registry); err != nil {
		return x, err
	}
	logf("packages built and pushed to %s in %s", x.registry, time.Since(began).Round(time.Second))

	dir, err := toolDir(x.root, "CROSSPLANE_DIR", "crossplane")
	if err != nil {
		return x, err
	}
	// The plain e2e tier (test/e2e) installs the provider's CRDs itself; Crossplane must start
	// from a cluster without them, as a user's would be, or activation would have nothing to do.
	if err := removeManagedResourceCRDs(ctx, x.c, x.root); err != nil {
		return x, err
	}
	x.core = &core{bin: filepath.Join(dir, "crossplane"), crds: filepath.Join(dir, "crds"), dir: work, logs: x.logs, kubeconfig: x.kubeconfig, c: x.c}
	if err := x.core.init(ctx); err != nil {
		return x, err
	}
	if err := x.core.start(ctx, "Function=External;Provider=External"); err != nil {
		return x, err
	}
	certs := filepath.Join(work, "server-certs")
	if err := serverCerts(ctx, x.c, certs); err != nil {
		return x, err
	}
	// A revision names its package by source (spec.image) and, after the ImageConfig's
	// rewrite, by where it was pulled from (status.resolvedPackage).
	byImage := map[string]pkg{}
	for _, p := range x.pkgs {
		if p.binary != "" {
			byImage[p.image], byImage[p.source] = p, p
		}
	}
	x.runtime = &externalRuntime{c: x.c, logs: x.logs, kubeconfig: x.kubeconfig, certs: certs, byImage: byImage,
		procs: map[string]*revisionProcess{}, activated: map[string]bool{}, external: map[string]bool{"ProviderRevision": true, "FunctionRevision": true}}
	x.runtime.run(ctx)
	logf("crossplane core and the external runtime up after %s", time.Since(began).Round(time.Second))
	return x, nil
}

// tearDown uninstalls the packages while core and the runtime still run (so finalizers are
// honoured), then stops both.
func tearDown() {
	if s == nil {
		return
	}
	if s.c != nil && s.core != nil && s.core.proc != nil && s.runtime != nil {
		uninstall(context.Background())
	}
	if s.runtime != nil {
		s.runtime.stop()
	}
	if s.core != nil && s.core.proc != nil {
		s.core.stop()
	}
	logf("logs of crossplane, the provider and the function: %s", s.logs)
}

// toolDir is where cluster/local/build-tools.sh put a tool (crossplane, crank): $env, as
// cluster/local/e2e.sh sets it, or what build-tools.sh <tool>-dir says.
func toolDir(root, env, tool string) (string, error) {
	if d := os.Getenv(env); d != "" {
		return d, nil
	}
	out, err := exec.Command(filepath.Join(root, "cluster", "local", "build-tools.sh"), tool+"-dir").Output()
	if err != nil {
		return "", fmt.Errorf("cannot locate %s: %w", tool, err)
	}
	d := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(d, tool)); err != nil {
		return "", fmt.Errorf("%s is not built (run cluster/local/build-tools.sh %s): %w", tool, tool, err)
	}
	return d, nil
}

// toolBinary is the path of a tool that build-tools.sh built.
func toolBinary(root, env, tool string) (string, error) {
	d, err := toolDir(root, env, tool)
	return filepath.Join(d, tool), err
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "crossplane e2e: "+format+"\n", args...)
}
