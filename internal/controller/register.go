// Package controller sets up the controllers of every kind.
package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/appbundle"
	"github.com/clusterops/provider-clusterops/internal/controller/chaosagent"
	"github.com/clusterops/provider-clusterops/internal/controller/config"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
	"github.com/clusterops/provider-clusterops/internal/controller/immortalcontainer"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// Parts are the controllers a manager runs: a provider that is not sharded
// runs all of them; a sharded replica runs Configs and ShardLabels once per
// cluster, under its leader election, and Managed for its share.
type Parts uint8

const (
	// Configs are the controllers of ProviderConfig and ClusterProviderConfig.
	Configs Parts = 1 << iota
	// Managed are the controllers of the managed resource kinds.
	Managed
	// ShardLabels label each managed resource with its shard (internal/shard).
	ShardLabels
)

// ManagedKinds are the kinds of the provider's managed resources.
func ManagedKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{
		workloadv1alpha1.ImmortalContainerGroupVersionKind,
		workloadv1alpha1.AppBundleGroupVersionKind,
		workloadv1alpha1.ConfigRolloutGroupVersionKind,
		copyv1alpha1.CopyRuleGroupVersionKind,
		chaosv1alpha1.ChaosAgentGroupVersionKind,
	}
}

// ManagedObjects are an empty object of each managed resource kind.
func ManagedObjects() []client.Object {
	return []client.Object{
		&workloadv1alpha1.ImmortalContainer{},
		&workloadv1alpha1.AppBundle{},
		&workloadv1alpha1.ConfigRollout{},
		&copyv1alpha1.CopyRule{},
		&chaosv1alpha1.ChaosAgent{},
	}
}

// Setup adds the controllers of parts to mgr at once; place is where
// ShardLabels put managed resources.
func Setup(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver, parts Parts, place shard.Placement) error {
	for _, k := range kinds(r, parts, place) {
		if err := k.setup(mgr, o); err != nil {
			return err
		}
	}
	return nil
}

// SetupGated adds each kind's controller once its CRDs are installed
// (Crossplane's safe-start), so that a package whose CRDs are not yet
// established does not crash the provider. done, when not nil, is called once
// every kind's setup has run (a failed one is logged), so that a caller can
// wait for the controllers to be there.
func SetupGated(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver, parts Parts, place shard.Placement, done func()) error {
	if o.Gate == nil {
		return errors.New("safe-start needs a gate")
	}
	ks := kinds(r, parts, place)
	var left sync.WaitGroup
	left.Add(len(ks))
	for _, k := range ks {
		o.Gate.Register(func() {
			defer left.Done()
			// The gate opens once a CRD is Established; the API server's
			// discovery, which the manager's REST mapper reads, may not list
			// the kind for a moment more. A kind whose setup first maps its
			// own type (a field index) fails before it registers anything,
			// so it tries again until discovery has it (about 20 s at most).
			if err := retry.OnError(setupBackoff, meta.IsNoMatchError, func() error { return k.setup(mgr, o) }); err != nil {
				mgr.GetLogger().Error(err, "cannot set up controller", "kind", k.gvks)
			}
		}, k.gvks...)
	}
	if done != nil {
		go func() { left.Wait(); done() }()
	}
	return nil
}

// setupBackoff spaces the tries of a kind's setup while discovery catches up
// with its CRD.
var setupBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1.5, Steps: 10, Cap: 5 * time.Second}

type kind struct {
	gvks  []schema.GroupVersionKind
	setup func(ctrl.Manager, managedkind.Options) error
}

func kinds(r *target.Resolver, parts Parts, place shard.Placement) []kind {
	var out []kind
	if parts&Configs != 0 {
		out = append(out, kind{
			gvks:  []schema.GroupVersionKind{v1alpha1.ProviderConfigGroupVersionKind, v1alpha1.ClusterProviderConfigGroupVersionKind, v1alpha1.ProviderConfigUsageGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return config.Setup(m, o.Options) },
		})
	}
	if parts&Managed != 0 {
		out = append(out, managed(r)...)
	}
	if parts&ShardLabels != 0 {
		for _, gvk := range ManagedKinds() {
			out = append(out, kind{
				gvks:  []schema.GroupVersionKind{gvk},
				setup: func(m ctrl.Manager, _ managedkind.Options) error { return shard.SetupLabeler(m, gvk, place) },
			})
		}
	}
	return out
}

func managed(r *target.Resolver) []kind {
	return []kind{
		{
			gvks:  []schema.GroupVersionKind{workloadv1alpha1.ImmortalContainerGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return immortalcontainer.Setup(m, o, r) },
		},
		{
			gvks:  []schema.GroupVersionKind{workloadv1alpha1.AppBundleGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return appbundle.Setup(m, o, r) },
		},
		{
			gvks:  []schema.GroupVersionKind{workloadv1alpha1.ConfigRolloutGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return configrollout.Setup(m, o, r) },
		},
		{
			gvks:  []schema.GroupVersionKind{copyv1alpha1.CopyRuleGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return copyrule.Setup(m, o, r) },
		},
		{
			gvks:  []schema.GroupVersionKind{chaosv1alpha1.ChaosAgentGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return chaosagent.Setup(m, o, r) },
		},
	}
}
