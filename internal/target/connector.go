package target

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

// A Connector is the one connector every kind uses: it resolves the managed
// resource's config and hands the target cluster to the kind's constructor of
// its external client.
type Connector[T resource.ModernManaged] struct {
	Resolver  *Resolver
	Recorder  event.Recorder
	NewClient func(c *Cluster, rec event.Recorder, mg T) managed.TypedExternalClient[T]
}

// Connect resolves mg's target cluster and returns the kind's external client.
func (c *Connector[T]) Connect(ctx context.Context, mg T) (managed.TypedExternalClient[T], error) {
	cl, err := c.Resolver.Resolve(ctx, mg)
	if err != nil {
		return nil, err
	}
	// A cluster that stopped answering fails here, at once, with the reason:
	// its managed resources retry with backoff and hold no worker meanwhile.
	if err := cl.Reachable(ctx); err != nil {
		return nil, err
	}
	return c.NewClient(cl, c.Recorder, mg), nil
}
