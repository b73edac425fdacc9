package target

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
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
	// OwnNamespace is set for kinds that act in their own namespace only
	// (AppBundle, ImmortalContainer, ConfigRollout): their config's reach
	// must allow that namespace on its cluster before they touch it.
	OwnNamespace bool
	// Unreachable, when set, is told of a managed resource refused because
	// its config does not reach its own namespace: it stops the watches the
	// resource holds there, which would otherwise go on reading where the
	// provider may not (a deny, then an API server restart that has them
	// watch again: the explorer's deny-then-restart case).
	Unreachable func(mg T)
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
	if c.OwnNamespace {
		if err := cl.CheckNamespace(ctx, mg.GetNamespace(), mg.GetNamespace()); err != nil {
			if c.Unreachable != nil {
				c.Unreachable(mg)
			}
			return outOfReach[T](mg, err)
		}
	}
	return c.NewClient(cl, c.Recorder, mg), nil
}

// outOfReach refuses a managed resource whose own namespace its config does
// not reach (TestAnotherClustersNamespaceIsNotTheTenants): it fails with why, touching
// nothing. Deleting it touches nothing either: what it may have made there
// before the reach changed is left, as the provider may not act there now.
func outOfReach[T resource.ModernManaged](mg T, err error) (managed.TypedExternalClient[T], error) {
	if !meta.WasDeleted(mg) {
		return nil, err
	}
	return refused[T]{}, nil
}

// refused is the external client of a deleted managed resource that may not
// act in its namespace: nothing exists that it may delete.
type refused[T resource.ModernManaged] struct{}

func (refused[T]) Observe(context.Context, T) (managed.ExternalObservation, error) {
	return managed.ExternalObservation{ResourceExists: false}, nil
}

func (refused[T]) Create(context.Context, T) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

func (refused[T]) Update(context.Context, T) (managed.ExternalUpdate, error) {
	return managed.ExternalUpdate{}, nil
}

func (refused[T]) Delete(context.Context, T) (managed.ExternalDelete, error) {
	return managed.ExternalDelete{}, nil
}

func (refused[T]) Disconnect(context.Context) error { return nil }
