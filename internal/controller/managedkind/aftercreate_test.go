package managedkind

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

func TestPollAfterCreate(t *testing.T) {
	failed := errors.New("boom")
	cases := map[string]struct {
		reason  string
		follows bool
		synced  xpv2.Condition
		res     reconcile.Result
		err     error
		want    reconcile.Result
	}{
		"CreatedReadinessFollows": {
			reason:  "The requeue after a create whose readiness an event brings becomes the next poll.",
			follows: true, synced: xpv2.ReconcileSuccess(), res: reconcile.Result{Requeue: true},
			want: reconcile.Result{RequeueAfter: 7 * time.Minute},
		},
		"CreatedNothingFollows": {
			reason: "A create that did not say its readiness follows is observed again at once.",
			synced: xpv2.ReconcileSuccess(), res: reconcile.Result{Requeue: true},
			want: reconcile.Result{Requeue: true},
		},
		"CreateNotWhole": {
			reason:  "A create whose annotations or connection details could not be written is retried.",
			follows: true, synced: xpv2.ReconcileError(failed), res: reconcile.Result{Requeue: true},
			want: reconcile.Result{Requeue: true},
		},
		"StatusNotWritten": {
			reason:  "A reconcile that failed keeps its error and its backoff.",
			follows: true, synced: xpv2.ReconcileSuccess(), res: reconcile.Result{Requeue: true}, err: failed,
			want: reconcile.Result{Requeue: true},
		},
		"ConflictRetry": {
			reason:  "A quick retry after a conflict stays one.",
			follows: true, synced: xpv2.ReconcileSuccess(), res: reconcile.Result{RequeueAfter: conflictRetry},
			want: reconcile.Result{RequeueAfter: conflictRetry},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := pollAfterCreate{interval: 7 * time.Minute, poll: func(_ resource.Managed, d time.Duration) time.Duration { return d },
				Reconciler: reconcilerFunc(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
					ab := &v1alpha1.AppBundle{}
					ab.SetConditions(tc.synced)
					if tc.follows {
						ReadinessFollows(ctx, ab)
					}
					return tc.res, tc.err
				})}
			got, err := r.Reconcile(context.Background(), reconcile.Request{})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nReconcile(...): -want, +got:\n%s", tc.reason, diff)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("\n%s\nReconcile(...): want error %v, got %v", tc.reason, tc.err, err)
			}
		})
	}
	// Outside a reconcile it says nothing, and does not fail.
	ReadinessFollows(context.Background(), &v1alpha1.AppBundle{})
}
