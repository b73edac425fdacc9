package appbundle

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/ownwrite"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// bundleKey owns the objects the tests of own writes write.
var bundleKey = types.NamespacedName{Namespace: "apps", Name: "web"}

func TestChangesDropOwnWritesEvents(t *testing.T) {
	w := ownwrite.New[ownwrite.Key]()
	p := changes(w, kindDeployment, deploymentChanged)
	ready := deployment(1, 1, corev1.ConditionTrue)
	written := ready.DeepCopy()
	written.Generation, written.ResourceVersion = 2, "2"
	w.Writing(bundleKey, ownwrite.KeyOf(kindDeployment, written), ownwrite.Patch())(written.ResourceVersion, nil)

	if p.Update(ctrlevent.UpdateEvent{ObjectOld: ready, ObjectNew: written}) {
		t.Errorf("the provider's own write of a new generation reconciles its AppBundle")
	}
	edited := written.DeepCopy()
	edited.Generation, edited.ResourceVersion = 3, "3"
	if !p.Update(ctrlevent.UpdateEvent{ObjectOld: written, ObjectNew: edited}) {
		t.Errorf("someone else's edit of the spec does not reconcile the AppBundle")
	}
	churn := edited.DeepCopy()
	churn.ResourceVersion, churn.Status.Replicas = "4", 3
	if p.Update(ctrlevent.UpdateEvent{ObjectOld: edited, ObjectNew: churn}) {
		t.Errorf("status churn reconciles the AppBundle")
	}
	if !p.Create(ctrlevent.CreateEvent{Object: churn}) {
		t.Errorf("a Deployment the provider did not create does not reconcile its AppBundle")
	}
	w.Writing(bundleKey, ownwrite.KeyOf(kindDeployment, churn), ownwrite.Patch())(churn.ResourceVersion, nil)
	if !p.Delete(ctrlevent.DeleteEvent{Object: churn}) || w.Len() != 0 {
		t.Errorf("a deletion does not reconcile the AppBundle, or its writes are still remembered (%d)", w.Len())
	}

	// The creation event of a Deployment being created, before the create's
	// answer, is the bundle's own.
	created := deployment(1, 0, corev1.ConditionFalse)
	created.ResourceVersion = "5"
	done := w.Writing(bundleKey, ownwrite.KeyOf(kindDeployment, created), ownwrite.Create())
	if p.Create(ctrlevent.CreateEvent{Object: created}) {
		t.Errorf("the creation event of the provider's create in flight reconciles its AppBundle")
	}
	if err := wrote(done, kindDeployment, created, nil); err != nil {
		t.Errorf("the create answered with the version of its creation event: %v", err)
	}
}

// TestWroteReportsAMiss: a creation event taken for the bundle's create in
// flight, which the answer shows was somebody else's (the bundle's apply then
// updated their Deployment), fails the reconcile, which is retried: the
// bundle must see what it missed.
func TestWroteReportsAMiss(t *testing.T) {
	w := ownwrite.New[ownwrite.Key]()
	p := changes(w, kindDeployment, deploymentChanged)
	theirs := deployment(1, 0, corev1.ConditionFalse)
	theirs.ResourceVersion = "5"
	done := w.Writing(bundleKey, ownwrite.KeyOf(kindDeployment, theirs), ownwrite.Create())
	if p.Create(ctrlevent.CreateEvent{Object: theirs}) {
		t.Fatal("the creation event during the bundle's create reconciles it")
	}
	ours := theirs.DeepCopy()
	ours.Generation, ours.ResourceVersion = 2, "6"
	if err := wrote(done, kindDeployment, ours, nil); err == nil {
		t.Error("a create whose answer shows another version than the creation event taken for it succeeded")
	}
	if !p.Update(ctrlevent.UpdateEvent{ObjectOld: theirs, ObjectNew: ours}) {
		t.Error("the event of the apply that updated somebody else's Deployment is taken for the bundle's own")
	}
}

func TestKeepOwnManagedFields(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate},
	}}}
	if _, err := keepOwnManagedFields(d); err != nil {
		t.Fatal(err)
	}
	want := []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply}}
	if diff := cmp.Diff(want, d.ManagedFields); diff != "" {
		t.Errorf("managed fields kept: -want, +got:\n%s", diff)
	}
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func foreignDeployment() client.Object {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Labels: map[string]string{"app": "web"}}}
}

func foreignService() client.Object {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}}}
}

// TestObserveReads checks where Observe reads an AppBundle's objects: the
// cache where it holds them, the API server where a wanted one is missing
// from it (the cache lags a create, and holds no object the bundle did not
// label), never the API server for an unwanted one missing from it, and only
// the API server for a bundle being deleted or on another cluster.
func TestObserveReads(t *testing.T) {
	withService := func(a *v1alpha1.AppBundle) {
		a.Spec.ForProvider.Port, a.Spec.ForProvider.Service = ptr.To[int32](80), v1alpha1.ServiceClusterIP
	}
	deleting := func(a *v1alpha1.AppBundle) {
		a.DeletionTimestamp = ptr.To(metav1.Now())
		a.Finalizers = []string{"finalizer.managedresource.crossplane.io"}
	}
	type want struct {
		exists, upToDate bool
		err              string
		apiReads         int
	}
	cases := map[string]struct {
		reason string
		ab     *v1alpha1.AppBundle
		cached []client.Object // nil: no cache (another cluster)
		api    []client.Object
		want   want
	}{
		"AllCached": {
			reason: "Objects the cache holds are not read again.",
			ab:     ab(withService),
			cached: made(t, ab(withService)),
			api:    made(t, ab(withService)),
			want:   want{exists: true, upToDate: true},
		},
		"CacheLagsCreate": {
			reason: "Objects just created, missing from the cache, are read from the API server and so exist: no second create.",
			ab:     ab(withService),
			cached: []client.Object{},
			api:    made(t, ab(withService)),
			want:   want{exists: true, upToDate: true, apiReads: 3},
		},
		"ForeignDeployment": {
			reason: "A Deployment the bundle did not label is not in the cache, but is seen in the way.",
			ab:     ab(),
			cached: []client.Object{},
			api:    []client.Object{foreignDeployment()},
			want:   want{err: `Deployment "web" exists and was not created by this AppBundle`, apiReads: 1},
		},
		"UnwantedServiceNotRead": {
			reason: "A Service the bundle does not want and did not label is none of its business: not even read.",
			ab:     ab(),
			cached: made(t, ab()),
			api:    append(made(t, ab()), foreignService()),
			want:   want{exists: true, upToDate: true},
		},
		"NothingYet": {
			reason: "A new bundle's wanted objects are read from the API server, its unwanted Service is not.",
			ab:     ab(),
			cached: []client.Object{},
			want:   want{apiReads: 2},
		},
		"Deleting": {
			reason: "A bundle being deleted reads the API server only: what it deletes is as the API server has it.",
			ab:     ab(deleting),
			cached: made(t, ab()),
			want:   want{apiReads: 3},
		},
		"AnotherCluster": {
			reason: "Without a cache (another cluster) every object is read from the API server.",
			ab:     ab(),
			api:    made(t, ab()),
			want:   want{exists: true, upToDate: true, apiReads: 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := scheme(t)
			reads := 0
			api := fake.NewClientBuilder().WithScheme(s).WithReturnManagedFields().WithObjects(tc.api...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					reads++
					return c.Get(ctx, key, obj, opts...)
				},
			}).Build()
			e := &external{cluster: &target.Cluster{Client: api, Local: true}, record: event.NewNopRecorder()}
			if tc.cached != nil {
				// The cache keeps the provider's managed fields (keepOwnManagedFields).
				e.cache = fake.NewClientBuilder().WithScheme(s).WithReturnManagedFields().WithObjects(tc.cached...).Build()
			}
			o, err := e.Observe(context.Background(), tc.ab)
			got := want{exists: o.ResourceExists, upToDate: o.ResourceUpToDate, apiReads: reads}
			if err != nil {
				got.err = err.Error()
				if tc.want.err != "" && strings.HasPrefix(got.err, tc.want.err) {
					// The message's start is what the test names.
					got.err = tc.want.err
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestUpdateJudgesReadinessByWhatItWrote: the event of the provider's own
// write does not reconcile the bundle, so Update must not leave the readiness
// Observe saw before it wrote.
func TestUpdateJudgesReadinessByWhatItWrote(t *testing.T) {
	bundle := ab()
	bundle.SetConditions(xpv2.Available())
	api := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(made(t, bundle)[1]).Build()
	own := ownwrite.New[ownwrite.Key]()
	e := &external{cluster: &target.Cluster{Client: api, Local: true}, record: event.NewNopRecorder(), own: own}

	// The Deployment was deleted: Update makes a new one, not yet Available.
	if _, err := e.Update(context.Background(), bundle); err != nil {
		t.Fatal(err)
	}
	if c := bundle.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionFalse {
		t.Errorf("Ready = %s (%s) after Update made a new Deployment, want False", c.Status, c.Message)
	}
	d := &appsv1.Deployment{}
	if err := api.Get(context.Background(), client.ObjectKey{Namespace: "apps", Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if _, ok := own.Heard(ownwrite.KeyOf(kindDeployment, d), ownwrite.Event{New: d.ResourceVersion}); !ok {
		t.Errorf("the Deployment Update wrote is not remembered as the provider's own write")
	}
}

func TestReadinessNeedsAnAvailableDeployment(t *testing.T) {
	withService := func(a *v1alpha1.AppBundle) {
		a.Spec.ForProvider.Port, a.Spec.ForProvider.Service = ptr.To[int32](80), v1alpha1.ServiceClusterIP
	}
	cases := map[string]struct {
		reason string
		ab     *v1alpha1.AppBundle
		c      children
		want   xpv2.Condition
	}{
		"NoDeployment": {
			reason: "Without a Deployment the bundle is not ready.",
			ab:     ab(),
			want:   xpv2.Unavailable().WithMessage("Deployment does not exist"),
		},
		"NotSeen": {
			reason: "A spec the Deployment's controller has not seen is rolling out.",
			ab:     ab(),
			c:      children{deployment: deployment(2, 1, corev1.ConditionTrue)},
			want:   xpv2.Unavailable().WithMessage("Deployment is rolling out generation 2: its controller has not seen it yet"),
		},
		"NotAvailable": {
			reason: "A Deployment not Available says how many replicas are ready.",
			ab:     ab(),
			c: children{deployment: deployment(1, 1, corev1.ConditionFalse, func(d *appsv1.Deployment) {
				d.Status.Replicas = 2
				d.Status.ReadyReplicas = 1
			})},
			want: xpv2.Unavailable().WithMessage("Deployment is not Available: 1/2 replicas ready"),
		},
		"NoService": {
			reason: "A wanted Service must exist.",
			ab:     ab(withService),
			c:      children{deployment: deployment(1, 1, corev1.ConditionTrue)},
			want:   xpv2.Unavailable().WithMessage("Service does not exist"),
		},
		"Ready": {
			reason: "An Available Deployment and the wanted Service make the bundle ready.",
			ab:     ab(withService),
			c:      children{deployment: deployment(1, 1, corev1.ConditionTrue), service: service()},
			want:   xpv2.Available(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := readiness(tc.ab, tc.c)
			if !got.Equal(tc.want) {
				t.Errorf("%s\nreadiness(...) = %+v, want %+v", tc.reason, got, tc.want)
			}
		})
	}
}
