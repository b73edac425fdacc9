package managedkind

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// conflictRetry is how soon a managed resource is reconciled again after a
// write of it met a newer version: the cache holds that version within
// milliseconds, so the next attempt will read it.
const conflictRetry = 50 * time.Millisecond

// reconcilerManager hands the managed reconciler a client that
//   - does not send status updates that would change nothing. The reconciler
//     writes a managed resource's status after every reconcile, changed or
//     not; the API server stores nothing for an unchanged one, but each is a
//     request, and every safety-net poll of every converged resource sent one.
//   - notes the managed resources whose writes met a conflict. The reconciler
//     requeues those through the controller's rate limiter, which backs off
//     from a second to a minute: made for failures, not for a cache that is a
//     few milliseconds behind. retryConflicts requeues them quickly instead.
type reconcilerManager struct {
	ctrl.Manager
	conflicts *conflicts
}

func (m reconcilerManager) GetClient() client.Client {
	return reconcilerClient{Client: m.Manager.GetClient(), conflicts: m.conflicts}
}

// conflicts are the managed resources whose writes met a conflict during
// their current reconcile. A key is reconciled by one worker at a time.
type conflicts struct{ m sync.Map }

func (c *conflicts) note(obj client.Object, err error) error {
	if kerrors.IsConflict(err) {
		c.m.Store(client.ObjectKeyFromObject(obj), true)
	}
	return err
}

func (c *conflicts) take(k types.NamespacedName) bool {
	_, ok := c.m.LoadAndDelete(k)
	return ok
}

type reconcilerClient struct {
	client.Client
	conflicts *conflicts
}

func (c reconcilerClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.conflicts.note(obj, c.Client.Update(ctx, obj, opts...))
}

func (c reconcilerClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.conflicts.note(obj, c.Client.Patch(ctx, obj, patch, opts...))
}

func (c reconcilerClient) Status() client.SubResourceWriter {
	return statusWriter{SubResourceWriter: c.Client.Status(), reader: c.Client, conflicts: c.conflicts}
}

type statusWriter struct {
	client.SubResourceWriter
	reader    client.Reader
	conflicts *conflicts
}

// Update sends obj's status unless the cache holds obj at the same
// resourceVersion with the same status: the object the API server holds then,
// so the update would be a no-op. Anything else, a newer or older cached copy
// included, is sent and the API server decides.
func (w statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if len(opts) == 0 && unchangedStatus(ctx, w.reader, obj) {
		return nil
	}
	return w.conflicts.note(obj, w.SubResourceWriter.Update(ctx, obj, opts...))
}

func (w statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return w.conflicts.note(obj, w.SubResourceWriter.Patch(ctx, obj, patch, opts...))
}

func unchangedStatus(ctx context.Context, r client.Reader, obj client.Object) bool {
	cached, ok := obj.DeepCopyObject().(client.Object)
	if !ok || r.Get(ctx, client.ObjectKeyFromObject(obj), cached) != nil {
		return false
	}
	if cached.GetResourceVersion() != obj.GetResourceVersion() {
		return false
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false
	}
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cached)
	if err != nil {
		return false
	}
	return equality.Semantic.DeepEqual(want["status"], have["status"])
}

// retryConflicts turns the managed reconciler's rate-limited requeue after a
// conflict into a short fixed delay. Requeues after failures keep their
// backoff: only a reconcile that met a conflict, and returned no error, is
// retried early.
type retryConflicts struct {
	reconcile.Reconciler
	conflicts *conflicts
}

func (r retryConflicts) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.conflicts.take(req.NamespacedName)
	res, err := r.Reconciler.Reconcile(ctx, req)
	if r.conflicts.take(req.NamespacedName) && err == nil && res.Requeue && res.RequeueAfter == 0 { //nolint:staticcheck // The managed reconciler still returns Requeue.
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}
