// Package testenv starts a real API server (envtest, with the kube-apiserver
// and etcd built by cluster/local/build-tools.sh) with the provider's CRDs from
// package/crds, runs the provider's controllers in-process, and offers polling
// assertions for integration tests.
package testenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/internal/provider"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// ProviderNamespace is the namespace the in-process provider believes it runs in.
const ProviderNamespace = "crossplane-system"

// An Env is a running API server with the provider's CRDs installed.
type Env struct {
	env    *envtest.Environment
	Config *rest.Config
	Client client.Client
	Scheme *kruntime.Scheme

	// Requests records the writes of the provider started by RunProvider to
	// the clusters its managed resources act on.
	Requests *RequestLog

	// ManagerWrites records the writes of that provider's manager to this
	// API server: managed resources' status, finalizers and events, so tests
	// can bound how often a failing resource is retried.
	ManagerWrites *RequestLog

	// Log, when set before RunProvider, receives the provider's logs at debug
	// level (as TESTENV_DEBUG shows them), for tests that inspect them.
	Log io.Writer

	// ProviderConfig, when set, is the config the provider started by
	// RunProvider authenticates with instead of Config's admin: an identity
	// bound to the provider's RBAC, to show that RBAC is enough.
	ProviderConfig *rest.Config

	// Rate, when set before RunProvider, is cmd/provider's
	// --max-reconcile-rate instead of the quick 50 tests run at.
	Rate int

	// ChangeLogSocket, when set before RunProvider, is the unix socket of a
	// change-log gRPC service that the provider sends every create, update
	// and delete to, as cmd/provider's --enable-changelogs does.
	ChangeLogSocket string

	// Provider is the provider RunProvider started last: its manager (whose
	// cache tests may inspect) and resolver.
	Provider *provider.Provider

	// certDir holds the serving certificate of a restartable API server.
	certDir string
}

// RepoRoot is the root of this repository.
func RepoRoot() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..")
}

// Scheme returns a scheme with the Kubernetes and provider types: the
// provider's own.
func Scheme() (*kruntime.Scheme, error) { return provider.Scheme() }

// assets finds the directory of kube-apiserver and etcd: KUBEBUILDER_ASSETS, or
// the cache that cluster/local/build-tools.sh fills.
func assets() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	out, err := exec.Command(filepath.Join(RepoRoot(), "cluster", "local", "build-tools.sh"), "envtest-dir").Output()
	if err != nil {
		return "", errors.Wrap(err, "cannot find the envtest binaries")
	}
	d := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(d, "kube-apiserver")); err != nil {
		return "", errors.Errorf("no kube-apiserver in %s: run `make tools` (or `make test`, which builds it) first", d)
	}
	return d, nil
}

// Start starts an API server. installCRDs installs package/crds, failing when
// the folder is missing.
func Start(installCRDs bool) (*Env, error) {
	return StartWith(Options{ProviderCRDs: installCRDs})
}

// Options say which CRDs an API server started by StartWith has.
type Options struct {
	// ProviderCRDs installs package/crds, failing when the folder is missing.
	ProviderCRDs bool

	// CRDDirs are more directories of CRDs to install, such as Crossplane's
	// own (CrossplaneCRDs).
	CRDDirs []string

	// Restartable keeps the API server's serving certificate in a directory
	// of its own for the Env's lifetime, so RestartAPIServer brings it back
	// on the same port with the same certificate and clients keep trusting it.
	// (envtest otherwise makes new certificates on every start.)
	Restartable bool

	// CompactionInterval, when set, is how often the API server compacts
	// etcd (kube-apiserver's --etcd-compaction-interval, 5m by default):
	// short, so that a test sees a client's watches fall so far behind
	// that they must relist.
	CompactionInterval time.Duration

	// ShardedListAndWatch turns on the API server's alpha feature gate of
	// that name: lists and watches filtered by shardSelector.
	ShardedListAndWatch bool
}

// StartWith starts an API server with the CRDs o asks for.
func StartWith(o Options) (*Env, error) {
	dir, err := assets()
	if err != nil {
		return nil, err
	}
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		Scheme:                   s,
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if o.ProviderCRDs {
		e.CRDDirectoryPaths = append(e.CRDDirectoryPaths, filepath.Join(RepoRoot(), "package", "crds"))
	}
	e.CRDDirectoryPaths = append(e.CRDDirectoryPaths, o.CRDDirs...)
	e.ErrorIfCRDPathMissing = len(e.CRDDirectoryPaths) > 0
	certDir := ""
	if o.Restartable {
		if certDir, err = os.MkdirTemp("", "testenv-apiserver-"); err != nil {
			return nil, errors.Wrap(err, "cannot make the API server's certificate directory")
		}
		s := e.ControlPlane.GetAPIServer()
		s.CertDir = certDir
		// Without it, the API server waits up to its request timeout (60s) on
		// open watches when it stops; with it, it answers new requests with
		// 429 Retry-After while in-flight ones drain, then stops within 2s.
		s.Configure().Set("shutdown-send-retry-after", "true")
	}
	if o.CompactionInterval > 0 {
		e.ControlPlane.GetAPIServer().Configure().Set("etcd-compaction-interval", o.CompactionInterval.String())
	}
	if o.ShardedListAndWatch {
		e.ControlPlane.GetAPIServer().Configure().Append("feature-gates", "ShardedListAndWatch=true")
	}
	cfg, err := e.Start()
	if err != nil {
		// Start fails after starting etcd and the API server when the CRDs
		// do not install: stop them, or they outlive the test binary.
		_ = e.Stop()
		_ = removeAll(certDir)
		return nil, errors.Wrap(err, "cannot start envtest")
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		_ = e.Stop()
		_ = removeAll(certDir)
		return nil, errors.Wrap(err, "cannot create client")
	}
	return &Env{env: e, Config: cfg, Client: c, Scheme: s, certDir: certDir}, nil
}

func removeAll(dir string) error {
	if dir == "" {
		return nil
	}
	return os.RemoveAll(dir)
}

// Stop stops the API server.
func (e *Env) Stop() error {
	if e.env == nil {
		return nil
	}
	err := e.env.Stop()
	_ = removeAll(e.certDir)
	return err
}

// RestartAPIServer stops the API server and starts it again on the same port,
// certificate and etcd (the data stays): clients see it go away and come back.
// The Env must have been started with Options.Restartable.
func (e *Env) RestartAPIServer() error {
	if e.certDir == "" {
		return errors.New("the API server is not restartable: start the Env with Options.Restartable")
	}
	s := e.env.ControlPlane.GetAPIServer()
	if err := s.Stop(); err != nil {
		return errors.Wrap(err, "cannot stop the API server")
	}
	// Tried again: an API server left stopped fails every test after it.
	var err error
	for range 3 {
		if err = s.Start(); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return errors.Wrap(err, "cannot start the API server again")
}

// Kubeconfig returns a kubeconfig for an admin user of this API server.
func (e *Env) Kubeconfig() ([]byte, error) {
	u, err := e.env.AddUser(envtest.User{Name: "remote-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, errors.Wrap(err, "cannot add envtest user")
	}
	return u.KubeConfig()
}

// RunProvider runs the provider against the Env until ctx ends, built as
// cmd/provider builds it (internal/provider: its scoped cache, metrics and
// safe-start), at a rate that keeps tests quick. poll is the safety-net poll
// interval.
func (e *Env) RunProvider(ctx context.Context, poll time.Duration) (*target.Resolver, error) {
	rate := 50
	if e.Rate > 0 {
		rate = e.Rate
	}
	return e.RunProviderAtRate(ctx, poll, rate)
}

// RunProviderAtRate is RunProvider with cmd/provider's --max-reconcile-rate.
// It returns once every kind's controller is on the manager (safe-start adds
// them when it sees their CRDs established).
func (e *Env) RunProviderAtRate(ctx context.Context, poll time.Duration, rate int) (*target.Resolver, error) {
	base := e.Config
	if e.ProviderConfig != nil {
		base = e.ProviderConfig
	}
	log := logging.NewNopLogger()
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	var w []io.Writer
	if os.Getenv("TESTENV_DEBUG") != "" {
		w = append(w, os.Stderr)
	}
	if e.Log != nil {
		w = append(w, e.Log)
	}
	// client-go's lines (leader election, watches that ended) go where the
	// provider's do, as cmd/provider sends them: not to the test's output.
	klog.SetLogger(logr.Discard())
	if len(w) > 0 {
		zl := zap.New(zap.UseDevMode(true), zap.WriteTo(io.MultiWriter(w...)))
		ctrl.SetLogger(zl)
		klog.SetLogger(zl.WithName("client-go"))
		log = logging.NewLogrLogger(zl)
	}
	e.ManagerWrites, e.Requests = &RequestLog{}, &RequestLog{}
	o := ProviderOptions(base, poll, rate)
	o.Logger = log
	o.WrapManager = func(rt http.RoundTripper) http.RoundTripper { return &logTransport{log: e.ManagerWrites, next: rt} }
	o.WrapTargets = func(rt http.RoundTripper) http.RoundTripper { return &logTransport{log: e.Requests, next: rt} }
	if e.ChangeLogSocket != "" {
		o.ChangeLogSocket, o.ChangeLogProvider = e.ChangeLogSocket, "provider-clusterops:test"
	}
	p, err := provider.New(o)
	if err != nil {
		return nil, errors.Wrap(err, "cannot build the provider")
	}
	e.Provider = p
	go func() {
		if err := p.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: provider stopped:", err)
		}
	}()
	select {
	case <-p.SetUp():
	case <-ctx.Done():
		return nil, errors.Wrap(ctx.Err(), "provider stopped before its controllers were set up")
	case <-time.After(time.Minute):
		return nil, errors.New("the provider's controllers were not set up within a minute: are the CRDs established?")
	}
	return p.Resolver, nil
}

// ProviderOptions are the provider's defaults (provider.DefaultOptions) for a
// provider that tests run against cfg: with the poll interval and
// --max-reconcile-rate, without jitter (so a test's poll is the poll), and
// with no endpoints listening, as several may run in one process.
func ProviderOptions(cfg *rest.Config, poll time.Duration, rate int) provider.Options {
	o := provider.DefaultOptions()
	o.Config, o.Namespace, o.MaxReconcileRate, o.Poll, o.PollJitter = cfg, ProviderNamespace, rate, poll, 0
	o.MetricsAddr, o.HealthAddr, o.PprofAddr = "0", "0", "0"
	return o
}

// Namespace creates a namespace with a unique name starting with prefix and
// the given labels, and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB, prefix string, lbls map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: lbls}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("cannot create namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.GetName()
}

// Eventually polls cond every 50ms until it returns true, failing the test with
// what the last call said when timeout passes. cond's error is not fatal: it is
// the reason the condition does not hold yet.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	EventuallyEvery(t, 50*time.Millisecond, timeout, what, cond)
}

// EventuallyEvery is Eventually polling every interval: a condition that lists
// a fleet of thousands would otherwise load the API server it observes.
func EventuallyEvery(t testing.TB, interval, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		// Each call gets its own deadline, so the last error reported is the
		// condition's, not the poll's deadline cutting a request short. A
		// fleet's lists take longer than a single object's read.
		ctx, cancel := context.WithTimeout(context.Background(), max(10*time.Second, 2*interval))
		defer cancel()
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
	}
}

// ForCluster returns an Env for a cluster that is already running, such as
// the local control plane of the e2e tier. Stop does nothing on it.
func ForCluster(cfg *rest.Config) (*Env, error) {
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, errors.Wrap(err, "cannot create client")
	}
	return &Env{Config: cfg, Client: c, Scheme: s}, nil
}

// InstallCRDs applies package/crds, once none of them is being deleted, and
// waits until every CRD is established.
func (e *Env) InstallCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "package", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return errors.Errorf("no CRDs in package/crds: %v", err)
	}
	// A CRD still being deleted (Crossplane removes a provider's CRDs
	// with its package) would take the apply and then vanish: wait it out.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, f := range files {
			objs, err := ReadObjects(f)
			if err != nil {
				return false, err
			}
			for _, o := range objs {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := e.Client.Get(ctx, types.NamespacedName{Name: o.GetName()}, crd); err == nil && crd.DeletionTimestamp != nil {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return errors.Wrap(err, "the provider's CRDs are still being deleted")
	}
	var names []string
	for _, f := range files {
		objs, err := ApplyFile(ctx, e.Client, f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			names = append(names, o.GetName())
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := e.Client.Get(ctx, types.NamespacedName{Name: n}, crd); err != nil {
				return false, nil //nolint:nilerr // Not there yet.
			}
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}

// Update reads o afresh, applies mutate and writes it, retrying when the write
// conflicts with the provider's own writes (status, finalizers).
func (e *Env) Update(t testing.TB, o client.Object, mutate func()) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		mutate()
		return e.Client.Update(context.Background(), o)
	})
	if err != nil {
		t.Fatalf("cannot update %s: %v", o.GetName(), err)
	}
}

// StartProvider prepares a running cluster for the provider, as `make demo`
// does (the CRDs and the example default ClusterProviderConfig), and runs the
// provider's controllers in-process at the given --max-reconcile-rate.
func (e *Env) StartProvider(ctx context.Context, poll time.Duration, rate int) error {
	if err := e.InstallCRDs(ctx); err != nil {
		return err
	}
	if _, err := ApplyFile(ctx, e.Client, filepath.Join(RepoRoot(), "examples", "providerconfig", "clusterproviderconfig.yaml")); err != nil {
		return err
	}
	_, err := e.RunProviderAtRate(ctx, poll, rate)
	return err
}

// Main is the TestMain of a package of integration tests: it starts an API
// server with the provider's CRDs and the example default
// ClusterProviderConfig, lets prepare set up what the package needs (set is
// handed the Env first), runs the provider's controllers with the poll
// interval, then the tests. It returns the exit code.
func Main(m *testing.M, poll time.Duration, set func(*Env), prepare func(ctx context.Context) error) int {
	e, err := Start(true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Stop() //nolint:errcheck // Best effort at exit.
	set(e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := ApplyFile(ctx, e.Client, filepath.Join(RepoRoot(), "examples", "providerconfig", "clusterproviderconfig.yaml")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if prepare != nil {
		if err := prepare(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if _, err := e.RunProvider(ctx, poll); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
