package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// The tests' vocabulary, one helper a step: Create objects, wait for a
// managed resource to be Synced (WaitSynced), Ready (WaitReady) or
// converged (WaitConverged), and poll any other condition (Eventually).
// Waits read the resource into the object they are given, so that a test
// goes on from what it last saw.

// A Conditioned is a managed resource as the waits read it.
type Conditioned interface {
	client.Object
	GetCondition(ct xpv2.ConditionType) xpv2.Condition
}

// Create creates objs through e.Client in order, failing the test at the
// first that cannot be created.
func (e *Env) Create(t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := e.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("cannot create %T %s/%s: %v", o, o.GetNamespace(), o.GetName(), err)
		}
	}
}

// WaitSynced polls until mg's Synced condition is True: its last reconcile
// succeeded.
func (e *Env) WaitSynced(t testing.TB, timeout time.Duration, mg Conditioned) {
	t.Helper()
	e.waitCondition(t, timeout, mg, xpv2.TypeSynced)
}

// WaitReady polls until mg's Ready condition is True.
func (e *Env) WaitReady(t testing.TB, timeout time.Duration, mg Conditioned) {
	t.Helper()
	e.waitCondition(t, timeout, mg, xpv2.TypeReady)
}

// WaitConverged polls until mg is converged, as the glossary of
// docs/architecture.md says: Synced True at its generation, Ready, and not
// being deleted. A failure names the condition that did not hold.
func (e *Env) WaitConverged(t testing.TB, timeout time.Duration, mg Conditioned) {
	t.Helper()
	Eventually(t, timeout, fmt.Sprintf("%T %s/%s to converge", mg, mg.GetNamespace(), mg.GetName()), func(ctx context.Context) (bool, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mg), mg); err != nil {
			return false, err
		}
		s, r := mg.GetCondition(xpv2.TypeSynced), mg.GetCondition(xpv2.TypeReady)
		switch {
		case mg.GetDeletionTimestamp() != nil:
			return false, errors.New("being deleted")
		case s.Status != corev1.ConditionTrue || s.ObservedGeneration != mg.GetGeneration():
			return false, fmt.Errorf("synced: %s %s at generation %d of %d", s.Reason, s.Message, s.ObservedGeneration, mg.GetGeneration())
		case r.Status != corev1.ConditionTrue:
			return false, fmt.Errorf("ready: %s %s", r.Reason, r.Message)
		}
		return true, nil
	})
}

// waitCondition polls until mg's condition ct is True.
func (e *Env) waitCondition(t testing.TB, timeout time.Duration, mg Conditioned, ct xpv2.ConditionType) {
	t.Helper()
	Eventually(t, timeout, fmt.Sprintf("%T %s/%s to be %s", mg, mg.GetNamespace(), mg.GetName(), ct), func(ctx context.Context) (bool, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mg), mg); err != nil {
			return false, err
		}
		return mg.GetCondition(ct).Status == corev1.ConditionTrue, nil
	})
}

// Background runs start, such as a cache's or a manager's Start, until the
// test ends, and waits for it to return then.
func Background(t testing.TB, start func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
}
