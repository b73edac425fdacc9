package urgency

import (
	"context"
	"testing"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestUrgentBeforeBacklog: a change heard after a backlog of new resources is
// handed out first; the initial list stays behind the backlog.
func TestUrgentBeforeBacklog(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	req := func(n string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: n}}
	}
	for _, n := range []string{"new-1", "new-2", "new-3"} {
		q.Add(req(n))
	}
	h := Handler(handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(req(e.Object.GetName()))
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(req(e.ObjectNew.GetName()))
		},
	})
	cm := func(name, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: cm("listed", "1"), IsInInitialList: true}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: cm("changed", "1"), ObjectNew: cm("changed", "2")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: cm("resynced", "3"), ObjectNew: cm("resynced", "3")}, q)
	var got []string
	for q.Len() > 0 {
		r, _ := q.Get()
		got = append(got, r.Name)
		q.Done(r)
	}
	want := []string{"changed", "new-1", "new-2", "new-3", "listed", "resynced"}
	if len(got) != len(want) {
		t.Fatalf("order: want %v, got %v", want, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order: want %v, got %v", want, got)
		}
	}
}

// TestLimitedLetsUrgentThrough: with the global limiter's slots taken, a
// routine reconcile is put off and an urgent one runs at once, once.
func TestLimitedLetsUrgentThrough(t *testing.T) {
	ran := 0
	inner := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		ran++
		return reconcile.Result{}, nil
	})
	l := workqueue.NewTypedMaxOfRateLimiter[string](&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(1), 1)})
	r := Limited("test", inner, l)
	req := func(n string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: n}}
	}
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, req("first")); err != nil || ran != 1 {
		t.Fatalf("the first reconcile takes the only slot: ran %d, %v", ran, err)
	}
	if res, _ := r.Reconcile(ctx, req("routine")); ran != 1 || res.RequeueAfter == 0 {
		t.Fatalf("a routine reconcile without a slot is put off: ran %d, %+v", ran, res)
	}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	Queue(q).Add(req("urgent"))
	if res, _ := r.Reconcile(ctx, req("urgent")); ran != 2 || res.RequeueAfter != 0 {
		t.Fatalf("an urgent reconcile runs at once: ran %d, %+v", ran, res)
	}
	if res, _ := r.Reconcile(ctx, req("urgent")); ran != 2 || res.RequeueAfter == 0 {
		t.Fatalf("urgency is spent by the reconcile it asked for: ran %d, %+v", ran, res)
	}
}
