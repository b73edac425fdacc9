// Package target resolves the cluster a managed resource acts on: it reads the
// managed resource's ProviderConfig or ClusterProviderConfig, tracks the usage,
// and hands out target-cluster clients that are built once per config and
// credential version and then reused.
package target

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/reach"
)

// A Cluster is the cluster a managed resource acts on, as its config says.
type Cluster struct {
	// ID names the cluster and the credentials used to reach it: the same for
	// every managed resource using the same config and kubeconfig, new when the
	// kubeconfig changes. Watches are shared by it.
	ID string

	// Client talks to the target cluster. It reads from the API server, not
	// from a cache: kinds that need watches set up their own narrow informers.
	Client client.Client

	// Config is the REST config of the target cluster.
	Config *rest.Config

	// Local is true when the target is the cluster the provider runs in, so
	// owner references from managed resources to the objects they create work.
	Local bool

	// Reach decides which namespaces the managed resource may act in.
	Reach reach.Policy

	// health is whether a remote cluster's API server answers; nil on the
	// provider's own cluster.
	health *health
}

// Reachable returns nil unless the cluster's API server stopped answering,
// and then an *Unreachable error at once: only one caller at a time, once the
// backoff allows, probes it again.
func (c *Cluster) Reachable(ctx context.Context) error {
	if c.health == nil {
		return nil
	}
	return c.health.check(ctx)
}

// CheckNamespace returns nil when a managed resource in namespace own may act in
// namespace ns of the target cluster, and a *reach.OutOfReachError otherwise. It
// reads the namespace's labels only when the policy needs them.
func (c *Cluster) CheckNamespace(ctx context.Context, own, ns string) error {
	err := c.Reach.Check(own, ns, nil)
	var oor *reach.OutOfReachError
	if err == nil || !c.Reach.NeedsLabels() || !errors.As(err, &oor) || !oor.Unmatched {
		return err
	}
	n := &corev1.Namespace{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: ns}, n); err != nil {
		return errors.Wrapf(err, "cannot get namespace %q to check reach", ns)
	}
	return c.Reach.Check(own, ns, n.GetLabels())
}
