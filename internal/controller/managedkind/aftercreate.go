package managedkind

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

// After a successful create the managed reconciler requeues the resource at
// once, through the controller's rate limiter (a second, then backing off), to
// observe whether what it made is ready yet. An AppBundle's Deployment or an
// ImmortalContainer's pod never is a second later, and each reports its
// readiness through an event the controller watches: the requeued reconcile
// read every object again to find them not ready, a third of a fleet's
// reconciles and a quarter of its requests. A kind's Create that knows such
// an event will follow says so (ReadinessFollows), and the requeue becomes
// the next poll, the safety net for an event that never comes.

type followsKey struct{}

// follows is what a reconcile's Create said: the resource whose readiness
// an event will bring; nil if it said nothing.
type follows struct{ mg resource.Managed }

// ReadinessFollows tells the reconcile creating mg that what its Create made
// reports its readiness through an event the controller watches, so the
// reconciler's requeue after the create is not needed. Call it only once the
// create has succeeded, and only for objects not ready yet: one that is
// ready already brings no event.
func ReadinessFollows(ctx context.Context, mg resource.Managed) {
	if f, ok := ctx.Value(followsKey{}).(*follows); ok {
		f.mg = mg
	}
}

// pollAfterCreate turns the managed reconciler's requeue after a create whose
// readiness follows into the next poll. Only a create that succeeded whole
// (Synced is ReconcileSuccess: annotations, connection details and status
// written) is: every other requeue is a retry and stays one.
type pollAfterCreate struct {
	reconcile.Reconciler
	poll     managed.PollIntervalHook
	interval time.Duration
}

func (r pollAfterCreate) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	f := &follows{}
	res, err := r.Reconciler.Reconcile(context.WithValue(ctx, followsKey{}, f), req)
	if f.mg == nil || err != nil || !res.Requeue || res.RequeueAfter != 0 ||
		f.mg.GetCondition(xpv2.TypeSynced).Reason != xpv2.ReasonReconcileSuccess {
		return res, err
	}
	return reconcile.Result{RequeueAfter: r.poll(f.mg, r.interval)}, nil
}
