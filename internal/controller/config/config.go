// Package config runs the controllers of ProviderConfig and
// ClusterProviderConfig: they count the managed resources that use a config and
// block its deletion while any do.
package config

import (
	"context"
	"slices"
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/flow"
	"github.com/clusterops/provider-clusterops/internal/whole"
)

// Setup adds the controllers of both config kinds.
func Setup(mgr ctrl.Manager, o controller.Options) error {
	for _, k := range []struct {
		kind   string
		object resource.ProviderConfig
	}{
		{kind: v1alpha1.ProviderConfigKind, object: &v1alpha1.ProviderConfig{}},
		{kind: v1alpha1.ClusterProviderConfigKind, object: &v1alpha1.ClusterProviderConfig{}},
	} {
		name := providerconfig.ControllerName(k.kind)
		of := resource.ProviderConfigKinds{
			Config:    v1alpha1.SchemeGroupVersion.WithKind(k.kind),
			Usage:     v1alpha1.ProviderConfigUsageGroupVersionKind,
			UsageList: v1alpha1.ProviderConfigUsageListGroupVersionKind,
		}
		r := providerconfig.NewReconciler(listsUncopied{managedkind.SkipNoOpWrites(mgr)}, of,
			providerconfig.WithLogger(o.Logger.WithValues("controller", name)),
			providerconfig.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name)))) //nolint:staticcheck // crossplane-runtime's recorder takes the record API.
		err := whole.Controller(mgr, func(mgr ctrl.Manager) error {
			return ctrl.NewControllerManagedBy(mgr).
				Named(name).
				WithOptions(flow.WithQueue(o.ForControllerRuntime(), mgr.GetLogger())).
				For(k.object, builder.WithPredicates(predicate.Funcs{UpdateFunc: countsAgain})).
				Watches(&v1alpha1.ProviderConfigUsage{}, debounced{EventHandler: &resource.EnqueueRequestForProviderConfig{Kind: k.kind}, after: usagesSettle}).
				Complete(ratelimiter.NewReconciler(name, errors.WithSilentRequeueOnConflict(r), o.GlobalRateLimiter))
		})
		if err != nil {
			return errors.Wrapf(err, "cannot set up %s controller", k.kind)
		}
	}
	return nil
}

// usagesSettle is how long a config's count of usages waits after a usage
// event for more: a fleet's usages are created by the thousand, and each
// count lists them all and writes the config's status.
const usagesSettle = time.Second

// listsUncopied hands the config reconciler a client whose lists are not deep
// copies of the cache's objects. It only counts the usages (and deletes one
// without a controller, which does not change it), and a count runs after
// every burst of usage events: a deep copy of every usage on each count
// would cost as much as the count itself, every second a fleet converges
// (BenchmarkFleet's CPU seconds hold it).
type listsUncopied struct{ ctrl.Manager }

func (m listsUncopied) GetClient() client.Client {
	return managedkind.UncopiedLists{Client: m.Manager.GetClient()}
}

// debounced queues its handler's requests after a delay; a request already
// waiting is not queued again, so a burst of events is one reconcile.
type debounced struct {
	handler.EventHandler
	after time.Duration
}

type delayedQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	after time.Duration
}

func (q delayedQueue) Add(r reconcile.Request) { q.AddAfter(r, q.after) }

func (h debounced) Create(ctx context.Context, e ctrlevent.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Create(ctx, e, delayedQueue{q, h.after})
}

func (h debounced) Update(ctx context.Context, e ctrlevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Update(ctx, e, delayedQueue{q, h.after})
}

func (h debounced) Delete(ctx context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Delete(ctx, e, delayedQueue{q, h.after})
}

func (h debounced) Generic(ctx context.Context, e ctrlevent.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Generic(ctx, e, delayedQueue{q, h.after})
}

// countsAgain says whether an update of a config is one its count must
// follow: a new spec, its deletion, its finalizers. Not its status: each
// count writes it, and while a fleet's usages are being created every
// count's write would start the next one, debounced or not
// (TestCountsAgain).
func countsAgain(e ctrlevent.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	return o.GetGeneration() != n.GetGeneration() ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
		!slices.Equal(o.GetFinalizers(), n.GetFinalizers())
}
