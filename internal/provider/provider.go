// Package provider builds provider-clusterops: its controller manager, with
// the cache, metrics and safe-start it runs with, and the controllers of every
// kind. cmd/provider and the test harness (internal/testenv) both build it
// here, so that what tests exercise is what production runs.
package provider

import (
	"context"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/transport"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/gate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/customresourcesgate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"

	"github.com/clusterops/provider-clusterops/apis"
	"github.com/clusterops/provider-clusterops/internal/apimetrics"
	clusterops "github.com/clusterops/provider-clusterops/internal/controller"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/flow"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// LeaderElectionID names the lease the replicas of the provider elect a
// leader with, in its namespace.
const LeaderElectionID = "provider-clusterops"

// Options say how to build the provider. cmd/provider fills them from its
// flags; tests vary what they must (a rate, addresses "0", a logger, request
// logging). A zero duration takes controller-runtime's default; an empty
// address, like "0", disables its endpoint.
type Options struct {
	// Config is the API server of the managed resources, and of the objects
	// that InjectedIdentity configs act on. New does not change it.
	Config *rest.Config

	// Logger receives the controllers' logs; nil discards them.
	// controller-runtime's own logger is its global one (ctrl.SetLogger).
	Logger logging.Logger

	// Namespace is the provider's own namespace: the leader election lease's,
	// and never reachable by managed resources.
	Namespace string

	// MaxReconcileRate bounds reconciles per second across all controllers.
	MaxReconcileRate int

	// MaxRoutineRequests bounds the routine requests in flight to the local
	// API server (flow.Options); urgent reconciles' requests skip the bound.
	// 0 leaves them unbounded; cmd/provider's default is
	// DefaultMaxRoutineRequests.
	MaxRoutineRequests int

	// QuietRoutineRequests bounds them instead while a reconcile that a
	// change caused runs, so that its requests share the API server with
	// fewer routine ones (flow.Options). 0, or not below
	// MaxRoutineRequests, keeps MaxRoutineRequests throughout;
	// cmd/provider's default is DefaultQuietRoutineRequests.
	QuietRoutineRequests int

	// Poll is the safety-net interval at which each managed resource is
	// checked; PollJitter spreads it by up to this fraction either way.
	Poll       time.Duration
	PollJitter float64

	// Sync is the interval at which the informer caches are resynced.
	Sync time.Duration

	// ManagementPolicies honours spec.managementPolicies.
	ManagementPolicies bool

	// SafeStart starts each kind's controller only once its CRDs are
	// established (Crossplane safe-start); otherwise all start at once and
	// the CRDs must be installed already.
	SafeStart bool

	// MetricsAddr, HealthAddr and PprofAddr are where the metrics, the
	// /healthz and /readyz, and the profiler endpoints listen.
	MetricsAddr, HealthAddr, PprofAddr string

	// LeaderElection elects a leader so that only one replica reconciles.
	LeaderElection                            bool
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// ChangeLogSocket, when set, is the unix socket of the change-log gRPC
	// service every create, update and delete is sent to, naming
	// ChangeLogProvider as the provider.
	ChangeLogSocket, ChangeLogProvider string

	// WrapManager and WrapTargets, when set, wrap the transport of the
	// manager's clients and of the clients InjectedIdentity configs act
	// with, such as to record their requests.
	WrapManager, WrapTargets transport.WrapperFunc

	// MetricsRegistry is where the provider's metrics are registered; nil is
	// controller-runtime's registry, which its metrics endpoint serves.
	MetricsRegistry prometheus.Registerer

	// SkipNameValidation lets controllers share names with those of another
	// provider in the same process: tests build several, and a sharded
	// replica builds its lead manager again when it loses the lead, and its
	// share's controllers again if they fail.
	SkipNameValidation bool

	// Shards, when positive, cuts the fleet of managed resources into this
	// many shards that the provider's live replicas share (internal/shard;
	// docs/operations.md, "Sharding"). A replica acts only on the resources
	// labelled with the shards whose Leases it holds, and runs the provider
	// configs' controllers and the shard labeler only while it leads. 0 is
	// one replica acting on every resource.
	Shards int

	// Identity names this replica among the live ones when Shards is set:
	// unique to the process, such as its pod's name and a random suffix.
	Identity string

	// shares are the caches of a sharded replica's share, which follow the
	// shards it holds; nil in the replica's lead manager and in a provider
	// that is not sharded.
	shares *shard.Shares
}

// registry is where the provider's metrics are registered: every package
// that keeps metrics takes it, and registers with it or takes the metrics of
// the same names already there.
func (o Options) registry() prometheus.Registerer {
	if o.MetricsRegistry == nil {
		return metrics.Registry
	}
	return o.MetricsRegistry
}

// parts are the controllers o's provider runs, with the options that go
// with them: a sharded replica's lead manager always elects a leader, and
// its share's manager serves no endpoints (the lead manager's serve the
// process's metrics) and is built again, with the same controllers, if it
// fails.
func parts(o Options) (clusterops.Parts, Options) {
	switch {
	case o.Shards <= 0:
		return clusterops.Configs | clusterops.Managed, o
	case o.shares == nil:
		o.LeaderElection = true
		return clusterops.Configs | clusterops.ShardLabels, o
	default:
		o.LeaderElection, o.SkipNameValidation = false, true
		o.MetricsAddr, o.HealthAddr, o.PprofAddr = "0", "0", "0"
		return clusterops.Managed, o
	}
}

// A Provider is a controller manager with every kind's controller on it (or,
// with safe-start, registered to be added once its CRDs are established).
type Provider struct {
	Manager  ctrl.Manager
	Resolver *target.Resolver

	setUp     chan struct{}
	closeConn func() error
	// sharding, on a replica's share, holds its shards (shareWork).
	sharding *sharding
	// share, on a sharded replica's lead manager, runs the replica's share
	// of the fleet; o builds the lead manager again (lead).
	share *shareRunner
	o     Options
}

// Scheme returns a scheme with the Kubernetes types, CustomResourceDefinitions
// (which safe-start watches) and the provider's types.
func Scheme() (*kruntime.Scheme, error) {
	s := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, errors.Wrap(err, "cannot add Kubernetes APIs to scheme")
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, errors.Wrap(err, "cannot add CRD API to scheme")
	}
	return s, errors.Wrap(apis.AddToScheme(s), "cannot add APIs to scheme")
}

// New builds the provider o describes. Start runs it.
func New(o Options) (*Provider, error) {
	if o.Config == nil {
		return nil, errors.New("the provider needs an API server config")
	}
	if o.MaxReconcileRate <= 0 {
		return nil, errors.New("the provider needs a positive reconcile rate")
	}
	if o.Shards > 0 && o.Identity == "" {
		return nil, errors.New("a sharded provider needs an identity for each replica")
	}
	which, o := parts(o)
	reg := o.registry()
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	fc, err := flow.New(flow.Options{
		ReconcileRate:        o.MaxReconcileRate,
		MaxRoutineRequests:   o.MaxRoutineRequests,
		QuietRoutineRequests: o.QuietRoutineRequests,
	}, reg)
	if err != nil {
		return nil, err
	}
	local, managerCfg, err := clientConfigs(o, fc, reg)
	if err != nil {
		return nil, err
	}
	sh, err := readSharding(o, managerCfg)
	if err != nil {
		return nil, err
	}
	mgr, err := newManager(o, s, managerCfg, sh)
	if err != nil {
		return nil, err
	}
	ko, err := kindOptions(o, fc, reg)
	if err != nil {
		return nil, err
	}
	p := &Provider{setUp: make(chan struct{}), closeConn: func() error { return nil }}
	if sh.share() {
		p.sharding, ko.Shares = sh, o.shares
		if sh.place.Filters() {
			ko.Watches = sh.watches
		}
	}
	if o.ChangeLogSocket != "" {
		clo, closeConn, err := managedkind.ChangeLogs(o.ChangeLogSocket, o.ChangeLogProvider)
		if err != nil {
			return nil, err
		}
		ko.Features.Enable(feature.EnableAlphaChangeLogs)
		ko.ChangeLogOptions = clo
		p.closeConn = closeConn
	}
	r := target.NewResolver(mgr.GetClient(), mgr.GetAPIReader(), local, s,
		target.WithProviderNamespace(o.Namespace))
	p.Manager, p.Resolver = mgr, r
	if err := p.setUpKinds(o.SafeStart, ko, which, sh.placement()); err != nil {
		_ = p.closeConn()
		return nil, err
	}
	if which&clusterops.ShardLabels != 0 {
		p.share, p.o = &shareRunner{o: o}, o
	}
	return p, nil
}

// clientConfigs are the configs of the clients the provider acts with on its
// own cluster (local, for InjectedIdentity configs) and of its manager. Every
// client made from them counts its requests by verb and resource, and its
// routine requests are bounded (flow.Control.Bound).
func clientConfigs(o Options, fc *flow.Control, reg prometheus.Registerer) (local, manager *rest.Config, err error) {
	cfg := rest.CopyConfig(o.Config)
	if err := apimetrics.Instrument(cfg, reg); err != nil {
		return nil, nil, err
	}
	fc.Bound(cfg)
	local = rest.CopyConfig(cfg)
	if o.WrapTargets != nil {
		local.Wrap(o.WrapTargets)
	}
	manager = rest.CopyConfig(cfg)
	if o.WrapManager != nil {
		manager.Wrap(o.WrapManager)
	}
	return local, manager, nil
}

// newManager makes the controller manager, with its cache, endpoints and
// leader election. A replica's share caches its shards' objects in a cache
// per shard (sharding.newCache); its lead manager caches only the managed
// resources the labeler has yet to place.
func newManager(o Options, s *kruntime.Scheme, cfg *rest.Config, sh *sharding) (ctrl.Manager, error) {
	co, err := cacheOptions(o.Sync, nil)
	if err != nil {
		return nil, err
	}
	if o.Shards > 0 && !sh.share() {
		lo, err := labelerCacheOptions(o.Shards, cfg)
		if err != nil {
			return nil, err
		}
		maps.Copy(co.ByObject, lo)
	}
	co.NewInformer = shard.NewInformer("", nil)
	mo := ctrl.Options{
		Scheme:                     s,
		Cache:                      co,
		Metrics:                    metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:     o.HealthAddr,
		PprofBindAddress:           o.PprofAddr,
		LeaderElection:             o.LeaderElection,
		LeaderElectionID:           LeaderElectionID,
		LeaderElectionNamespace:    o.Namespace,
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              positive(o.LeaseDuration),
		RenewDeadline:              positive(o.RenewDeadline),
		RetryPeriod:                positive(o.RetryPeriod),
	}
	if sh.share() {
		mo.NewCache = sh.newCache(s, o.Sync)
	}
	if o.SkipNameValidation {
		mo.Controller.SkipNameValidation = &o.SkipNameValidation
	}
	if mo.Metrics.BindAddress == "" {
		mo.Metrics.BindAddress = "0"
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create controller manager")
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, errors.Wrap(err, "cannot add health check")
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, errors.Wrap(err, "cannot add ready check")
	}
	return mgr, nil
}

// kindOptions are what every kind's controller is set up with.
func kindOptions(o Options, fc *flow.Control, reg prometheus.Registerer) (managedkind.Options, error) {
	log := o.Logger
	if log == nil {
		log = logging.NewNopLogger()
	}
	mrMetrics, err := apimetrics.Existing(reg, managed.NewMRMetricRecorder())
	if err != nil {
		return managedkind.Options{}, errors.Wrap(err, "cannot register managed resource metrics")
	}
	stateMetrics, err := apimetrics.Existing(reg, statemetrics.NewMRStateMetrics())
	if err != nil {
		return managedkind.Options{}, errors.Wrap(err, "cannot register managed resource state metrics")
	}
	ko := managedkind.Options{
		Options: controller.Options{
			Logger:                  log,
			MaxConcurrentReconciles: o.MaxReconcileRate,
			PollInterval:            o.Poll,
			GlobalRateLimiter:       fc.RateLimiter(),
			Features:                &feature.Flags{},
			MetricOptions: &controller.MetricOptions{
				PollStateMetricInterval: 5 * time.Second,
				MRMetrics:               mrMetrics,
				MRStateMetrics:          stateMetrics,
			},
		},
		PollJitter: o.PollJitter,
		Flow:       fc,
		Metrics:    reg,
	}
	if o.ManagementPolicies {
		ko.Features.Enable(feature.EnableBetaManagementPolicies)
	}
	return ko, nil
}

// setUpKinds adds every kind's controller to the manager: at once, or with
// safe-start each once its CRDs are established.
func (p *Provider) setUpKinds(safeStart bool, ko managedkind.Options, which clusterops.Parts, place shard.Placement) error {
	if !safeStart {
		if err := clusterops.Setup(p.Manager, ko, p.Resolver, which, place); err != nil {
			return err
		}
		close(p.setUp)
		return nil
	}
	ko.Gate = new(gate.Gate[schema.GroupVersionKind])
	if err := customresourcesgate.Setup(p.Manager, ko.Options); err != nil {
		return errors.Wrap(err, "cannot set up safe-start gate")
	}
	return clusterops.SetupGated(p.Manager, ko, p.Resolver, which, place, func() { close(p.setUp) })
}

// Start runs the provider until ctx ends. A sharded replica runs its share
// of the fleet beside its lead manager (lead).
func (p *Provider) Start(ctx context.Context) error {
	if p.share != nil {
		return p.lead(ctx)
	}
	return p.run(ctx)
}

// run runs the provider's manager until ctx ends.
func (p *Provider) run(ctx context.Context) error {
	defer p.closeConn() //nolint:errcheck // Nothing to do about it on the way out.
	return errors.Wrap(p.Manager.Start(ctx), "cannot run controller manager")
}

// SetUp is closed once every kind's controller has been added to the
// manager: at once without safe-start, once the kinds' CRDs are established
// with it. A controller added to a running manager starts at once.
func (p *Provider) SetUp() <-chan struct{} { return p.setUp }

func positive(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}
