package flow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/fake"
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
	h := testControl(t, nil, 0, 0).Handler(handler.Funcs{
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
	c := testControl(t, l, 0, 0)
	r := c.Reconciler("test", inner, nil)
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
	c.Queue(q).Add(req("urgent"))
	if res, _ := r.Reconcile(ctx, req("urgent")); ran != 2 || res.RequeueAfter != 0 {
		t.Fatalf("an urgent reconcile runs at once: ran %d, %+v", ran, res)
	}
	if res, _ := r.Reconcile(ctx, req("urgent")); ran != 2 || res.RequeueAfter == 0 {
		t.Fatalf("urgency is spent by the reconcile it asked for: ran %d, %+v", ran, res)
	}
}

// TestLimitedLight: with the global limiter's slots taken, a light
// resource's reconcile runs from its own bucket, a routine one is put off and
// then runs when it comes back, and the light bucket, once empty, puts
// off light reconciles too.
func TestLimitedLight(t *testing.T) {
	var ran []string
	inner := reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		ran = append(ran, r.Name)
		return reconcile.Result{}, nil
	})
	global := &ratelimiter.BucketRateLimiter{Limiter: rate.NewLimiter(rate.Limit(0.001), 1)}
	r := testControl(t, global, 0, 0).Reconciler("test", inner, func(_ context.Context, r reconcile.Request) bool { return r.Name != "routine" })
	req := func(n string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: n}}
	}
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, req("routine")); err != nil {
		t.Fatal(err)
	}
	putOff, _ := r.Reconcile(ctx, req("routine"))
	for i := range LightShare {
		if res, _ := r.Reconcile(ctx, req(fmt.Sprintf("converged-%d", i))); res.RequeueAfter != 0 {
			t.Fatalf("converged reconcile %d of a bucket of %d was put off: %+v", i, LightShare, res)
		}
	}
	over, _ := r.Reconcile(ctx, req("converged-over"))
	again, _ := r.Reconcile(ctx, req("routine"))
	want := []string{"routine"}
	for i := range LightShare {
		want = append(want, fmt.Sprintf("converged-%d", i))
	}
	want = append(want, "routine")
	if diff := cmp.Diff(want, ran); diff != "" {
		t.Errorf("reconciles run: -want, +got:\n%s", diff)
	}
	if putOff.RequeueAfter == 0 || over.RequeueAfter == 0 || again.RequeueAfter != 0 {
		t.Errorf("put off: a routine reconcile without a slot %v (want > 0), a converged one past its bucket %v (want > 0), the routine one come back %v (want 0)",
			putOff.RequeueAfter, over.RequeueAfter, again.RequeueAfter)
	}
}

func TestLightBucket(t *testing.T) {
	fc, err := New(Options{ReconcileRate: 100}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a := fc.light
	c, ok := a.(*ratelimiter.BucketRateLimiter)
	if !ok {
		t.Fatalf("converged limiter of a bucket is %T, want a bucket", a)
	}
	if got, want := [2]float64{float64(c.Limit()), float64(c.Burst())}, [2]float64{1000, 10000}; got != want {
		t.Errorf("converged bucket of rate 100: rate, burst = %v, want %v", got, want)
	}
}

// managedResource is a managed resource at generation gen with the given Synced
// (synced at generation syncedGen) and Ready statuses.
func managedResource(gen int64, synced corev1.ConditionStatus, syncedGen int64, ready corev1.ConditionStatus, mut ...func(*fake.Managed)) *fake.Managed {
	mg := &fake.Managed{}
	mg.SetGeneration(gen)
	if synced != "" {
		mg.SetConditions(xpv2.Condition{Type: xpv2.TypeSynced, Status: synced, Reason: "ReconcileSuccess", ObservedGeneration: syncedGen})
	}
	if ready != "" {
		mg.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: ready, Reason: "Available"})
	}
	for _, m := range mut {
		m(mg)
	}
	return mg
}

// TestConvergedAndLight: which statuses are converged, and which light
// (converged, or new: never reconciled).
func TestConvergedAndLight(t *testing.T) {
	now := metav1.Now()
	deleting := func(mg *fake.Managed) { mg.SetDeletionTimestamp(&now) }
	cases := map[string]struct {
		reason           string
		mg               *fake.Managed
		converged, light bool
	}{
		"Converged": {
			reason:    "Synced at its generation and Ready is converged; its reconcile is a check.",
			mg:        managedResource(3, corev1.ConditionTrue, 3, corev1.ConditionTrue),
			converged: true, light: true,
		},
		"NewSpec": {
			reason: "A spec its last reconcile did not see is routine work.",
			mg:     managedResource(4, corev1.ConditionTrue, 3, corev1.ConditionTrue),
		},
		"New": {
			reason: "A resource never reconciled has no conditions; its create asked for its first reconcile.",
			mg:     managedResource(1, "", 0, ""),
			light:  true,
		},
		"NewBeingDeleted": {
			reason: "A resource deleted before its first reconcile has its deletion to do.",
			mg:     managedResource(1, "", 0, "", deleting),
		},
		"FirstFailed": {
			reason: "A resource whose first reconcile failed retries at the routine rate.",
			mg:     managedResource(1, corev1.ConditionFalse, 1, ""),
		},
		"Failing": {
			reason: "A resource whose last reconcile failed is not converged.",
			mg:     managedResource(2, corev1.ConditionFalse, 2, corev1.ConditionTrue),
		},
		"NotReady": {
			reason: "A resource that is not Ready may still be on its way.",
			mg:     managedResource(2, corev1.ConditionTrue, 2, corev1.ConditionFalse),
		},
		"Deleting": {
			reason: "A resource being deleted has its deletion to do.",
			mg:     managedResource(2, corev1.ConditionTrue, 2, corev1.ConditionTrue, deleting),
		},
		"CreateIncomplete": {
			reason: "A resource whose create has not recorded its result is not converged.",
			mg: managedResource(2, corev1.ConditionTrue, 2, corev1.ConditionTrue, func(mg *fake.Managed) {
				meta.SetExternalCreatePending(mg, now.Time)
			}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Converged(tc.mg); got != tc.converged {
				t.Errorf("%s\nConverged(...) = %t, want %t", tc.reason, got, tc.converged)
			}
			if got := Light(tc.mg); got != tc.light {
				t.Errorf("%s\nLight(...) = %t, want %t", tc.reason, got, tc.light)
			}
		})
	}
}

// FuzzConvergedAndLight checks that a converged resource is Synced at its
// current generation and Ready, and a light one converged or without a Synced
// condition and not being deleted, whatever else its status says.
func FuzzConvergedAndLight(f *testing.F) {
	f.Add(int64(1), uint8(1), int64(1), uint8(1), false)
	f.Add(int64(2), uint8(1), int64(1), uint8(1), false)
	f.Add(int64(2), uint8(1), int64(2), uint8(2), true)
	f.Add(int64(1), uint8(0), int64(0), uint8(0), false)
	f.Add(int64(1), uint8(0), int64(0), uint8(2), true)
	status := func(b uint8) corev1.ConditionStatus {
		return []corev1.ConditionStatus{"", corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}[b%4]
	}
	f.Fuzz(func(t *testing.T, gen int64, synced uint8, syncedGen int64, ready uint8, deleting bool) {
		mg := managedResource(gen, status(synced), syncedGen, status(ready), func(mg *fake.Managed) {
			if deleting {
				now := metav1.Now()
				mg.SetDeletionTimestamp(&now)
			}
		})
		converged := !deleting && status(synced) == corev1.ConditionTrue && syncedGen == gen && status(ready) == corev1.ConditionTrue
		light := converged || (!deleting && status(synced) == "")
		if got := Converged(mg); got != converged {
			t.Errorf("Converged(gen %d, synced %q at %d, ready %q, deleting %t) = %t, want %t", gen, status(synced), syncedGen, status(ready), deleting, got, converged)
		}
		if got := Light(mg); got != light {
			t.Errorf("Light(gen %d, synced %q at %d, ready %q, deleting %t) = %t, want %t", gen, status(synced), syncedGen, status(ready), deleting, got, light)
		}
	})
}

// TestLimitedTimesUrgent: an urgent reconcile records how long its request
// waited from its first add, and how long it ran; a routine one neither.
func TestLimitedTimesUrgent(t *testing.T) {
	count := func(h *prometheus.HistogramVec) (uint64, float64) {
		t.Helper()
		m := &dto.Metric{}
		if err := h.WithLabelValues("timed").(prometheus.Metric).Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	inner := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		time.Sleep(20 * time.Millisecond)
		return reconcile.Result{}, nil
	})
	fc := testControl(t, workqueue.NewTypedMaxOfRateLimiter[string](), 0, 0)
	r := fc.Reconciler("timed", inner, nil)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "timed"}}
	q := priorityqueue.New[reconcile.Request]("timed")
	defer q.ShutDown()
	fc.Queue(q).Add(req)
	time.Sleep(30 * time.Millisecond)
	fc.Queue(q).Add(req) // Joins the first: the wait counts from it.
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n, sum := count(fc.metrics.urgentWait); n != 1 || sum < 0.03 {
		t.Errorf("urgent wait: %d observations, %.3f s; want 1 of at least 0.03 s", n, sum)
	}
	if n, sum := count(fc.metrics.urgentReconcile); n != 1 || sum < 0.02 {
		t.Errorf("urgent reconcile: %d observations, %.3f s; want 1 of at least 0.02 s", n, sum)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n, _ := count(fc.metrics.urgentReconcile); n != 1 {
		t.Errorf("a routine reconcile was timed as urgent: %d observations", n)
	}
}

// testControl is a Control whose global limiter is l (New's when nil), with
// the given bounds on routine requests and metrics of its own.
func testControl(t *testing.T, l ratelimiter.RateLimiter, n, quiet int) *Control {
	t.Helper()
	c, err := New(Options{ReconcileRate: 100, MaxRoutineRequests: n, QuietRoutineRequests: quiet}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if l != nil {
		c.global, c.light = l, lightOf(l)
	}
	return c
}
