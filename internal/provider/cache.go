package provider

import (
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/customresourcesgate"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	clusterops "github.com/clusterops/provider-clusterops/internal/controller"
)

// cacheOptions scope the manager's cache to what the provider acts on; on a
// sharded replica (share), to what its shards' managed resources made.
func cacheOptions(sync time.Duration, share labels.Selector) (cache.Options, error) {
	byObject, err := clusterops.CacheOptions(share)
	if err != nil {
		return cache.Options{}, err
	}
	if share != nil {
		// A replica's share reads the usages of its own resources, which
		// carry their shard (target's track); the configs' controllers, on
		// the lead manager, count every usage.
		byObject[&v1alpha1.ProviderConfigUsage{}] = cache.ByObject{Label: share}
	}
	// Safe-start reads only a CRD's names, versions and conditions; the
	// schemas are most of its size.
	byObject[&apiextensionsv1.CustomResourceDefinition{}] = cache.ByObject{Transform: customresourcesgate.TransformStripCRDSchema}
	return cache.Options{
		SyncPeriod:       positive(sync),
		DefaultTransform: cache.TransformStripManagedFields(),
		// Only objects the provider made are cached and watched, not every pod,
		// claim or Service in the cluster; workloads are watched as metadata
		// only (ConfigRollout), and kept as ConfigRollout reads them
		// (configrollout.SlimWorkload). ConfigMaps and Secrets are never cached here:
		// kinds watch the ones they reference through internal/watchset.
		// Kinds read what they act on from the API server, so objects outside
		// the cache are seen. AppBundles watch their Deployments, claims and
		// Services in a label-scoped cache of their own (appbundle.CacheOptions),
		// as Deployments may not be scoped here: these options are keyed by
		// kind, and a label scope for Deployments would hide unlabelled ones
		// from ConfigRollout's metadata watch. The claim and Service entries
		// keep any read of those through the manager's client scoped. A
		// sharded replica's ConfigRollouts are its shards' only
		// (shardCacheOptions); the locks and baselines of every other rollout
		// are read from a slim cache of all of them that ConfigRollout's
		// Setup adds (configrollout.SlimRollout). Each kind's entries come
		// from internal/controller (CacheOptions).
		ByObject: byObject,
	}, nil
}
