package managedkind

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// indexConfig is the field index of a kind's managed resources by the config
// their spec.providerConfigRef names (target.ConfigKey).
const indexConfig = "managed.providerconfig"

// recovered is a source of a kind's managed resources that failed on a remote
// cluster: each time the cluster answers again after an outage
// (target.Resolver.OnRecovered), those whose config names it and whose Synced
// condition is False are queued at once. Their retries would otherwise wait
// out a backoff that an outage of minutes stretched to its cap, a minute,
// and then for the rate limiter all at once. Resources that did not fail are
// not queued: they lost nothing.
func recovered(mgr ctrl.Manager, r *target.Resolver, obj client.Object, list client.ObjectList) (source.Source, error) {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, indexConfig, configKeys); err != nil {
		return nil, errors.Wrap(err, "cannot index managed resources by their config")
	}
	c := mgr.GetCache()
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.OnRecovered(ctx, func(key string) {
			for _, req := range failedOn(ctx, c, list, key) {
				q.Add(req)
			}
		})
		return nil
	}), nil
}

// failedOn are the requests of the managed resources of list's kind whose
// config is key and whose Synced condition is False, as c holds them.
func failedOn(ctx context.Context, c client.Reader, list client.ObjectList, key string) []reconcile.Request {
	l, ok := list.DeepCopyObject().(client.ObjectList)
	if !ok || c.List(ctx, l, client.MatchingFields{indexConfig: key}) != nil {
		return nil
	}
	var out []reconcile.Request
	_ = meta.EachListItem(l, func(o runtime.Object) error {
		if mg, ok := o.(resource.Managed); ok && mg.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionFalse {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}})
		}
		return nil
	})
	return out
}

// configKeys are a managed resource's values of indexConfig.
func configKeys(o client.Object) []string {
	mg, ok := o.(resource.ModernManaged)
	if !ok {
		return nil
	}
	if k := target.ConfigKey(mg); k != "" {
		return []string{k}
	}
	return nil
}

// watchConfigs adds to b the watches of both config kinds, whose edits
// reconcile the managed resources that name them (configEdited).
func watchConfigs(b *builder.Builder, c client.Reader, list client.ObjectList) *builder.Builder {
	edits := configEdited(c, list)
	return b.Watches(&v1alpha1.ClusterProviderConfig{}, edits, builder.WithPredicates(configEdit{})).
		Watches(&v1alpha1.ProviderConfig{}, edits, builder.WithPredicates(configEdit{}))
}

// configEdited maps an edit of a ClusterProviderConfig or ProviderConfig to
// the managed resources of list's kind whose config it is, as c's index
// holds them: a reach granted or denied, or credentials pointed elsewhere,
// holds from their next reconcile, not from their next poll.
func configEdited(c client.Reader, list client.ObjectList) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		key := v1alpha1.ClusterProviderConfigKind + "//" + obj.GetName()
		if _, ok := obj.(*v1alpha1.ProviderConfig); ok {
			key = v1alpha1.ProviderConfigKind + "/" + obj.GetNamespace() + "/" + obj.GetName()
		}
		l, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok || c.List(ctx, l, client.MatchingFields{indexConfig: key}) != nil {
			return nil
		}
		var out []reconcile.Request
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			if mg, ok := o.(client.Object); ok {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}})
			}
			return nil
		})
		return out
	})
}

// configEdit passes a config's spec edits and a config made while the
// provider runs (one its resources waited for), not its status (the count
// of its users changes with every resource made or deleted) nor the
// configs the provider lists as it starts, when every resource is
// reconciled anyway. It is a type rather than predicate.Funcs: those
// closures, inlined into the generic Setup, crashed at run time (go1.26.8).
type configEdit struct{}

func (configEdit) Create(e ctrlevent.CreateEvent) bool { return !e.IsInInitialList }

func (configEdit) Update(e ctrlevent.UpdateEvent) bool {
	return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration()
}

func (configEdit) Delete(ctrlevent.DeleteEvent) bool { return false }

func (configEdit) Generic(ctrlevent.GenericEvent) bool { return false }
