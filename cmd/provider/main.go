// Command provider runs provider-clusterops: the controllers of its managed
// resources and provider configs, against the cluster named by KUBECONFIG or
// the in-cluster service account.
package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/internal/provider"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/version"
)

type options struct {
	debug                    bool
	poll                     time.Duration
	pollJitter               int
	sync                     time.Duration
	maxReconcileRate         int
	maxRoutineRequests       int
	quietRoutineRequests     int
	leaderElection           bool
	enableManagementPolicies bool
	safeStart                bool
	namespace                string
	metricsAddr              string
	healthAddr               string
	pprofAddr                string
	leaseDuration            time.Duration
	renewDeadline            time.Duration
	retryPeriod              time.Duration
	enableChangeLogs         bool
	changeLogsSocketPath     string
	shards                   int
}

func parse(args []string) (options, error) {
	o := options{}
	fs := flags(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.validate()
}

// flags are the provider's flags, which fill o; their defaults are
// provider.DefaultOptions.
func flags(o *options) *flag.FlagSet {
	d := provider.DefaultOptions()
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	fs.BoolVar(&o.debug, "debug", false, "Log at debug level.")
	fs.DurationVar(&o.poll, "poll", d.Poll, "Safety-net interval at which each managed resource is checked for drift; kinds react to watch events at once.")
	fs.IntVar(&o.pollJitter, "poll-jitter-percentage", int(d.PollJitter*100), "Spread of the safety-net polls: each is --poll plus or minus up to this percent of it (0-100), so that resources created or restarted together do not poll together.")
	fs.DurationVar(&o.sync, "sync", d.Sync, "Interval at which the informer caches are resynced.")
	fs.IntVar(&o.maxReconcileRate, "max-reconcile-rate", d.MaxReconcileRate, "Maximum reconciles per second across all controllers.")
	fs.IntVar(&o.maxRoutineRequests, "max-routine-requests", d.MaxRoutineRequests, "Routine requests (new resources, polls, resyncs, a restart's checks) the provider keeps in flight to the API server; requests of reconciles that a change in the cluster caused skip this bound, so that they do not queue behind a converging fleet. 0 means no bound.")
	fs.IntVar(&o.quietRoutineRequests, "quiet-routine-requests", d.QuietRoutineRequests, "Routine requests the provider keeps in flight while a reconcile that a change in the cluster caused runs, so that its requests share the API server with fewer routine ones. 0, or a value not below --max-routine-requests, keeps --max-routine-requests throughout.")
	fs.BoolVar(&o.leaderElection, "leader-election", d.LeaderElection, "Elect a leader so that only one replica reconciles.")
	fs.BoolVar(&o.enableManagementPolicies, "enable-management-policies", d.ManagementPolicies, "Honour spec.managementPolicies of managed resources.")
	fs.BoolVar(&o.safeStart, "safe-start", d.SafeStart, "Start each kind's controller only once its CRD is installed (Crossplane safe-start).")
	fs.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", d.Namespace), "The provider's own namespace: leader election lease, and never reachable by managed resources.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", d.MetricsAddr, "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", d.HealthAddr, "Address of the /healthz and /readyz endpoints; 0 disables them.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", d.PprofAddr, "Address of the Go profiler's /debug/pprof endpoints; 0 disables them.")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", d.LeaseDuration, "How long a leader's lease lasts without renewal: the longest a replica waits to take over from a leader that died.")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", d.RenewDeadline, "How long the leader keeps trying to renew its lease before it gives up leading (and exits).")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", d.RetryPeriod, "How often replicas try to acquire or renew the lease.")
	fs.IntVar(&o.shards, "shards", d.Shards, "Cut the fleet of managed resources into this many shards that every live replica shares, each acting on its own (Leases in --namespace; the crossplane.io/shard label pins a resource). 0 is one replica acting on all, the others waiting to lead.")
	// As in crossplane-runtime's providers: off by default, and the socket is
	// where Crossplane's changelogs sidecar listens.
	fs.BoolVar(&o.enableChangeLogs, "enable-changelogs", false, "Send every create, update and delete of every managed resource kind to the change-log gRPC service (alpha).")
	fs.StringVar(&o.changeLogsSocketPath, "changelogs-socket-path", "/var/run/changelogs/changelogs.sock", "Unix socket of the change-log gRPC service, used with --enable-changelogs.")
	return fs
}

// validate refuses what the flags cannot mean together.
func (o options) validate() error {
	if o.enableChangeLogs && o.changeLogsSocketPath == "" {
		return errors.New("--enable-changelogs needs a --changelogs-socket-path")
	}
	if o.poll <= 0 || o.sync <= 0 || o.maxReconcileRate <= 0 {
		return errors.New("--poll, --sync and --max-reconcile-rate must be positive")
	}
	if o.maxRoutineRequests < 0 || o.quietRoutineRequests < 0 {
		return errors.New("--max-routine-requests and --quiet-routine-requests must not be negative")
	}
	if o.shards < 0 || o.shards > maxShards {
		return errors.Errorf("--shards must be between 0 and %d", maxShards)
	}
	if o.pollJitter < 0 || o.pollJitter > 100 {
		return errors.New("--poll-jitter-percentage must be between 0 and 100")
	}
	// client-go refuses these only once the election starts; say so at once.
	if o.retryPeriod <= 0 || o.renewDeadline <= time.Duration(leaderelection.JitterFactor*float64(o.retryPeriod)) || o.leaseDuration <= o.renewDeadline {
		return errors.New("leader election needs --leader-election-lease-duration > --leader-election-renew-deadline > 1.2 × --leader-election-retry-period > 0")
	}
	return nil
}

// maxShards bounds --shards: every shard is a Lease its holder renews each
// retry period.
const maxShards = 256

// identity names this process among the provider's replicas: its pod's name,
// which Kubernetes makes unique among live pods, and a random suffix, so that
// a restarted container is a new replica rather than one that holds Leases it
// does not know of.
func identity() string {
	host := envOr("POD_NAME", "")
	if host == "" {
		host, _ = os.Hostname()
	}
	return shard.Identity(host, rand.Text())
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func main() {
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	zl := zap.New(zap.UseDevMode(o.debug))
	log := logging.NewLogrLogger(zl.WithName("provider-clusterops"))
	// client-go's own lines (leader election, a watch that ended) in the
	// provider's format and stream, not klog's.
	klog.SetLogger(zl.WithName("client-go"))
	if o.debug {
		ctrl.SetLogger(zl)
	} else {
		// controller-runtime is chatty at info level; our own logger says what matters.
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	log.Info("Starting", "version", version.Version, "poll", o.poll.String(), "namespace", o.namespace)

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return errors.Wrap(err, "cannot get API server config: set KUBECONFIG or run in a cluster")
	}
	p, err := provider.New(providerOptions(o, cfg, log))
	if err != nil {
		return err
	}
	return p.Start(ctrl.SetupSignalHandler())
}

// providerOptions are what the flags o say to build the provider with.
func providerOptions(o options, cfg *rest.Config, log logging.Logger) provider.Options {
	po := provider.Options{
		Config:               cfg,
		Logger:               log,
		Namespace:            o.namespace,
		MaxReconcileRate:     o.maxReconcileRate,
		MaxRoutineRequests:   o.maxRoutineRequests,
		QuietRoutineRequests: o.quietRoutineRequests,
		Poll:                 o.poll,
		PollJitter:           float64(o.pollJitter) / 100,
		Sync:                 o.sync,
		ManagementPolicies:   o.enableManagementPolicies,
		SafeStart:            o.safeStart,
		MetricsAddr:          o.metricsAddr,
		HealthAddr:           o.healthAddr,
		PprofAddr:            o.pprofAddr,
		LeaderElection:       o.leaderElection,
		LeaseDuration:        o.leaseDuration,
		RenewDeadline:        o.renewDeadline,
		RetryPeriod:          o.retryPeriod,
		Shards:               o.shards,
	}
	if o.shards > 0 {
		po.Identity = identity()
	}
	if o.enableChangeLogs {
		po.ChangeLogSocket, po.ChangeLogProvider = o.changeLogsSocketPath, "provider-clusterops:"+version.Version
	}
	return po
}
