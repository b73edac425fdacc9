package target

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/shard"
)

// fenced is c with every write checked, as it is sent, against the fence of
// the reconcile that makes it (shard.CheckWrite): a sharded replica whose
// Lease on the managed resource's shard ran out by its own clock, as after
// a freeze, writes nothing to the target cluster (TestFencedClientWrites).
// Reads go through unchecked.
func fenced(c client.WithWatch) client.WithWatch {
	// A pointer, so that clients compare as the same when they are
	// (TestClientsAreReused): the interceptor is a struct of funcs.
	return &fencedClient{WithWatch: interceptor.NewClient(c, fencing())}
}

type fencedClient struct{ client.WithWatch }

// fencing are the interceptor's functions that check each write.
func fencing() interceptor.Funcs {
	check := func(ctx context.Context) error {
		return errors.Wrap(shard.CheckWrite(ctx), "cannot write")
	}
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.CreateOption) error {
			if err := check(ctx); err != nil {
				return err
			}
			return c.Create(ctx, obj, o...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.UpdateOption) error {
			if err := check(ctx); err != nil {
				return err
			}
			return c.Update(ctx, obj, o...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, o ...client.PatchOption) error {
			if err := check(ctx); err != nil {
				return err
			}
			return c.Patch(ctx, obj, p, o...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, o ...client.ApplyOption) error {
			if err := check(ctx); err != nil {
				return err
			}
			return c.Apply(ctx, obj, o...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.DeleteOption) error {
			if err := check(ctx); err != nil {
				return err
			}
			return c.Delete(ctx, obj, o...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.DeleteAllOfOption) error {
			if err := check(ctx); err != nil {
				return err
			}
			return c.DeleteAllOf(ctx, obj, o...)
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, o ...client.SubResourceCreateOption) error {
			if err := check(ctx); err != nil {
				return err
			}
			return c.SubResource(sub).Create(ctx, obj, subObj, o...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, o ...client.SubResourceUpdateOption) error {
			if err := check(ctx); err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, o...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
			if err := check(ctx); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, p, o...)
		},
	}
}
