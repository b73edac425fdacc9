// Command provider runs provider-clusterops: the controllers of its managed
// resources and provider configs, against the cluster named by KUBECONFIG or
// the in-cluster service account.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/gate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/customresourcesgate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"

	"github.com/clusterops/provider-clusterops/apis"
	"github.com/clusterops/provider-clusterops/internal/apimetrics"
	clusterops "github.com/clusterops/provider-clusterops/internal/controller"
	"github.com/clusterops/provider-clusterops/internal/controller/appbundle"
	"github.com/clusterops/provider-clusterops/internal/controller/immortalcontainer"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/version"
)

type options struct {
	debug                    bool
	poll                     time.Duration
	pollJitter               int
	sync                     time.Duration
	maxReconcileRate         int
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
}

func parse(args []string) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	fs.BoolVar(&o.debug, "debug", false, "Log at debug level.")
	fs.DurationVar(&o.poll, "poll", 10*time.Minute, "Safety-net interval at which each managed resource is checked for drift; kinds react to watch events at once.")
	fs.IntVar(&o.pollJitter, "poll-jitter-percentage", 10, "Spread of the safety-net polls: each is --poll plus or minus up to this percent of it (0-100), so that resources created or restarted together do not poll together.")
	fs.DurationVar(&o.sync, "sync", time.Hour, "Interval at which the informer caches are resynced.")
	// The kinds act on the Kubernetes API, whose priority and fairness protects
	// it, not on a cloud API with quotas: 10, the usual Crossplane default,
	// would make a 1000-namespace copy wait on the client for 20 s.
	fs.IntVar(&o.maxReconcileRate, "max-reconcile-rate", 100, "Maximum reconciles per second across all controllers; API clients get 5x this in requests per second, with twice that burst.")
	fs.BoolVar(&o.leaderElection, "leader-election", false, "Elect a leader so that only one replica reconciles.")
	fs.BoolVar(&o.enableManagementPolicies, "enable-management-policies", true, "Honour spec.managementPolicies of managed resources.")
	fs.BoolVar(&o.safeStart, "safe-start", true, "Start each kind's controller only once its CRD is installed (Crossplane safe-start).")
	fs.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "crossplane-system"), "The provider's own namespace: leader election lease, and never reachable by managed resources.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address of the Go profiler's /debug/pprof endpoints; 0 disables them.")
	// How fast a replica takes over from a leader that died without releasing
	// its lease; the defaults suit a production cluster, tests shorten them.
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 60*time.Second, "How long a leader's lease lasts without renewal: the longest a replica waits to take over from a leader that died.")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 50*time.Second, "How long the leader keeps trying to renew its lease before it gives up leading (and exits).")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "How often replicas try to acquire or renew the lease.")
	// As in crossplane-runtime's providers: off by default, and the socket is
	// where Crossplane's changelogs sidecar listens.
	fs.BoolVar(&o.enableChangeLogs, "enable-changelogs", false, "Send every create, update and delete of every managed resource kind to the change-log gRPC service (alpha).")
	fs.StringVar(&o.changeLogsSocketPath, "changelogs-socket-path", "/var/run/changelogs/changelogs.sock", "Unix socket of the change-log gRPC service, used with --enable-changelogs.")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.enableChangeLogs && o.changeLogsSocketPath == "" {
		return o, errors.New("--enable-changelogs needs a --changelogs-socket-path")
	}
	if o.poll <= 0 || o.sync <= 0 || o.maxReconcileRate <= 0 {
		return o, errors.New("--poll, --sync and --max-reconcile-rate must be positive")
	}
	if o.pollJitter < 0 || o.pollJitter > 100 {
		return o, errors.New("--poll-jitter-percentage must be between 0 and 100")
	}
	// client-go refuses these only once the election starts; say so at once.
	if o.retryPeriod <= 0 || o.renewDeadline <= time.Duration(leaderelection.JitterFactor*float64(o.retryPeriod)) || o.leaseDuration <= o.renewDeadline {
		return o, errors.New("leader election needs --leader-election-lease-duration > --leader-election-renew-deadline > 1.2 × --leader-election-retry-period > 0")
	}
	return o, nil
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
	// Every client made from cfg, the remote clusters' aside, counts its
	// requests by verb and resource.
	apimetrics.Instrument(cfg)
	apimetrics.Register(metrics.Registry)
	ownedPods, err := ownedBy(immortalcontainer.LabelOwner)
	if err != nil {
		return err
	}
	ownedByBundle, err := ownedBy(appbundle.LabelOwner)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ratelimiter.LimitRESTConfig(cfg, o.maxReconcileRate), ctrl.Options{
		Cache: cache.Options{
			SyncPeriod:       &o.sync,
			DefaultTransform: cache.TransformStripManagedFields(),
			// Only objects the provider made are cached and watched, not every pod,
			// claim or Service in the cluster; workloads are watched as metadata
			// only (ConfigRollout). ConfigMaps and Secrets are never cached here:
			// kinds watch the ones they reference through internal/watchset.
			// Kinds read what they act on from the API server, so objects outside
			// the cache are seen. AppBundles watch their Deployments, claims and
			// Services in a label-scoped cache of their own (appbundle.CacheOptions),
			// as Deployments may not be scoped here: these options are keyed by
			// kind, and a label scope for Deployments would hide unlabelled ones
			// from ConfigRollout's metadata watch. The claim and Service entries
			// keep any read of those through the manager's client scoped.
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:                   {Label: ownedPods},
				&corev1.PersistentVolumeClaim{}: {Label: ownedByBundle},
				&corev1.Service{}:               {Label: ownedByBundle},
			},
		},
		Metrics:                    metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:     o.healthAddr,
		PprofBindAddress:           o.pprofAddr,
		LeaderElection:             o.leaderElection,
		LeaderElectionID:           "provider-clusterops",
		LeaderElectionNamespace:    o.namespace,
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              &o.leaseDuration,
		RenewDeadline:              &o.renewDeadline,
		RetryPeriod:                &o.retryPeriod,
	})
	if err != nil {
		return errors.Wrap(err, "cannot create controller manager")
	}
	if err := apis.AddToScheme(mgr.GetScheme()); err != nil {
		return errors.Wrap(err, "cannot add APIs to scheme")
	}
	// The safe-start gate watches CustomResourceDefinitions.
	if err := apiextensionsv1.AddToScheme(mgr.GetScheme()); err != nil {
		return errors.Wrap(err, "cannot add CRD API to scheme")
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return errors.Wrap(err, "cannot add health check")
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return errors.Wrap(err, "cannot add ready check")
	}

	mrMetrics := managed.NewMRMetricRecorder()
	stateMetrics := statemetrics.NewMRStateMetrics()
	metrics.Registry.MustRegister(mrMetrics, stateMetrics)

	co := controller.Options{
		Logger:                  log,
		MaxConcurrentReconciles: o.maxReconcileRate,
		PollInterval:            o.poll,
		GlobalRateLimiter:       ratelimiter.NewGlobal(o.maxReconcileRate),
		Features:                &feature.Flags{},
		MetricOptions: &controller.MetricOptions{
			PollStateMetricInterval: 5 * time.Second,
			MRMetrics:               mrMetrics,
			MRStateMetrics:          stateMetrics,
		},
	}
	if o.enableManagementPolicies {
		co.Features.Enable(feature.EnableBetaManagementPolicies)
	}
	if o.enableChangeLogs {
		clo, _, err := managedkind.ChangeLogs(o.changeLogsSocketPath, "provider-clusterops:"+version.Version)
		if err != nil {
			return err
		}
		co.Features.Enable(feature.EnableAlphaChangeLogs)
		co.ChangeLogOptions = clo
	}

	limited := ratelimiter.LimitRESTConfig(cfg, o.maxReconcileRate)
	r := target.NewResolver(mgr.GetClient(), mgr.GetAPIReader(), cfg, mgr.GetScheme(),
		target.WithProviderNamespace(o.namespace), target.WithClientRate(limited.QPS, limited.Burst))
	mo := managedkind.Options{Options: co, PollJitter: float64(o.pollJitter) / 100}
	if o.safeStart {
		mo.Gate = new(gate.Gate[schema.GroupVersionKind])
		if err := customresourcesgate.Setup(mgr, mo.Options); err != nil {
			return errors.Wrap(err, "cannot set up safe-start gate")
		}
		if err := clusterops.SetupGated(mgr, mo, r); err != nil {
			return err
		}
	} else if err := clusterops.Setup(mgr, mo, r); err != nil {
		return err
	}
	return errors.Wrap(mgr.Start(ctrl.SetupSignalHandler()), "cannot run controller manager")
}

// ownedBy selects objects that carry the label key.
func ownedBy(key string) (labels.Selector, error) {
	r, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot select objects labelled %s", key)
	}
	return labels.NewSelector().Add(*r), nil
}
