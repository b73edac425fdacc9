// Package process tests what the provider guarantees when its process, its
// API server or its leader dies: the provider runs as a real OS process (built
// from cmd/provider), killed with SIGKILL and run as two replicas, against a
// real API server and etcd (envtest) with the provider's CRDs.
package process

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// providerNamespace is the provider's own namespace: the lease lives there.
const providerNamespace = "crossplane-system"

// providerBin is cmd/provider, built once for the package.
var providerBin string

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime; the provider processes log to
	// files of their own.
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "reliability-process-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if providerBin, err = testenv.BuildProvider(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

// A cluster is an API server of a test's own, with the provider's CRDs, its
// namespace and the example default ClusterProviderConfig (reach: team-* and
// namespaces labelled clusterops.io/reachable=true).
type cluster struct {
	*testenv.Env
	kubeconfig string
	logs       string
}

func startCluster(t *testing.T, restartable bool) *cluster {
	t.Helper()
	return startClusterWith(t, testenv.Options{Restartable: restartable})
}

// startClusterWith is startCluster with an API server started as o says; the
// provider's CRDs are always installed.
func startClusterWith(t *testing.T, o testenv.Options) *cluster {
	t.Helper()
	o.ProviderCRDs = true
	env, err := testenv.StartWith(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dir := t.TempDir()
	kc, err := env.WriteKubeconfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: providerNamespace}}); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.ApplyFile(ctx, env.Client, filepath.Join(testenv.RepoRoot(), "examples", "providerconfig", "clusterproviderconfig.yaml")); err != nil {
		t.Fatal(err)
	}
	return &cluster{Env: env, kubeconfig: kc, logs: dir}
}

// A provider is one provider process.
type provider struct {
	*testenv.Process
	name    string
	metrics int
	// shares are the lines of a sharded replica's log that say its share
	// changed, as far as the test read it.
	shares []string
}

// runProvider starts the provider binary against the cluster with args added
// to its namespace and endpoints, and kills it when the test ends. When the
// test fails, the end of its log is shown.
func (c *cluster) runProvider(t *testing.T, name string, args ...string) *provider {
	t.Helper()
	return c.runProviderWith(t, name, c.kubeconfig, args...)
}

// runProviderWith is runProvider with a kubeconfig of the test's choosing.
func (c *cluster) runProviderWith(t *testing.T, name, kubeconfig string, args ...string) *provider {
	t.Helper()
	metrics, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	health, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{
		"--namespace=" + providerNamespace,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(health),
	}, args...)
	if os.Getenv("TESTENV_DEBUG") != "" {
		args = append(args, "--debug")
	}
	p, err := testenv.StartProcess(filepath.Join(c.logs, name+".log"), providerBin, args, "KUBECONFIG="+kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("last lines of provider %s (pid %d, %v):\n%s", name, p.Pid(), p.ExitErr(), p.LogTail(30))
		}
	})
	return &provider{Process: p, name: name, metrics: metrics}
}

// metric returns the value of the first sample of the provider's metrics whose
// line starts with prefix (a name and labels), and whether there is one.
func (p *provider) metric(ctx context.Context, prefix string) (float64, bool, error) {
	var v float64
	found := false
	err := p.scrape(ctx, func(l string) (bool, error) {
		if !strings.HasPrefix(l, prefix) {
			return true, nil
		}
		var err error
		v, err = sampleValue(l)
		found = err == nil
		return false, err
	})
	return v, found, err
}

// requests returns the provider's API requests so far (clusterops_api_requests_total)
// by their labels, such as `resource="configmaps",verb="get"`.
func (p *provider) requests(ctx context.Context) (map[string]float64, error) {
	const name = "clusterops_api_requests_total{"
	out := map[string]float64{}
	err := p.scrape(ctx, func(l string) (bool, error) {
		if rest, ok := strings.CutPrefix(l, name); ok {
			labels, _, _ := strings.Cut(rest, "}")
			v, err := sampleValue(l)
			out[labels] = v
			return err == nil, err
		}
		return true, nil
	})
	return out, err
}

// scrape reads the provider's metrics and hands each line to each until it
// returns false or an error.
func (p *provider) scrape(ctx context.Context, each func(line string) (bool, error)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", p.metrics), nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	s := bufio.NewScanner(res.Body)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		if more, err := each(s.Text()); err != nil || !more {
			return err
		}
	}
	return s.Err()
}

// sampleValue is the value of a sample line of the text format.
func sampleValue(l string) (float64, error) {
	return strconv.ParseFloat(strings.TrimSpace(l[strings.LastIndex(l, " ")+1:]), 64)
}

// leading reports whether the provider holds the lease, by its own account.
func (p *provider) leading(ctx context.Context) (bool, error) {
	v, ok, err := p.metric(ctx, `leader_election_master_status{name="provider-clusterops"}`)
	return ok && v == 1, err
}

// campaigning reports whether the provider's leader elector runs: client-go
// reports it as not leading from when it is made, right before it first
// tries to acquire the lease.
func (p *provider) campaigning(ctx context.Context) (bool, error) {
	_, ok, err := p.metric(ctx, `leader_election_master_status{name="provider-clusterops"}`)
	return ok, err
}

// reconciles counts the provider's reconciles of one controller, by outcome.
func (p *provider) reconciles(ctx context.Context, controller string) (float64, error) {
	var total float64
	for _, r := range []string{"success", "error", "requeue", "requeue_after"} {
		v, _, err := p.metric(ctx, fmt.Sprintf(`controller_runtime_reconcile_total{controller=%q,result=%q}`, controller, r))
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// idleAfter waits until the provider has reconciled at least n resources of
// controller and then sent no request for two seconds, and returns its
// requests so far.
func (p *provider) idleAfter(t *testing.T, controller string, n int) map[string]float64 {
	t.Helper()
	eventually(t, scaled(time.Minute), "every resource reconciled and the provider idle", func(ctx context.Context) (bool, error) {
		r, err := p.reconciles(ctx, controller)
		if err != nil || r < float64(n) {
			return false, err
		}
		before, err := p.requests(ctx)
		if err != nil {
			return false, err
		}
		time.Sleep(2 * time.Second)
		after, err := p.requests(ctx)
		return maps.Equal(before, after), err
	})
	got, err := p.requests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// eventually is testenv.Eventually with a clearer name at call sites that
// wait for the provider.
var eventually = testenv.Eventually

// stays polls cond every 100ms for d and fails the test the first time it
// does not hold: what must not happen does not happen for a while.
func stays(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var broken error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, d, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ok, err := cond(ctx)
		if err != nil || !ok {
			broken = fmt.Errorf("%w (holds: %t)", err, ok)
			return true, nil
		}
		return false, nil
	})
	if broken != nil || !wait.Interrupted(err) {
		t.Fatalf("%s no longer holds: %v", what, broken)
	}
}
