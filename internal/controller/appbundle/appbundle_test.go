package appbundle

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// The external client is tested against controller-runtime's fake client,
// which applies and records managed fields as the API server does (but does
// not default fields): what the provider applied, and what another field
// manager ("kubectl-edit") changed since, is told apart as on a cluster.

const otherManager = "kubectl-edit"

func withService(a *v1alpha1.AppBundle) {
	a.Spec.ForProvider.Port, a.Spec.ForProvider.Service = ptr.To[int32](80), v1alpha1.ServiceClusterIP
}

func withEnv(a *v1alpha1.AppBundle) {
	a.Spec.ForProvider.Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "EMPTY"}}
}

func adopting(a *v1alpha1.AppBundle) { a.Spec.ForProvider.AdoptExisting = true }

func deletePolicy(a *v1alpha1.AppBundle) { a.Spec.ForProvider.PVCDeletionPolicy = v1alpha1.PVCDelete }

func deletingBundle(a *v1alpha1.AppBundle) {
	a.DeletionTimestamp = ptr.To(metav1.Now())
	a.Finalizers = []string{"finalizer.managedresource.crossplane.io"}
}

func size(s string) func(*v1alpha1.AppBundle) {
	return func(a *v1alpha1.AppBundle) { q := resource.MustParse(s); a.Spec.ForProvider.Storage.Size = &q }
}

// made are the objects the AppBundle makes, as the provider's apply leaves
// them (its managed fields included), the Deployment Available.
func made(t *testing.T, ab *v1alpha1.AppBundle) []client.Object {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithReturnManagedFields().Build()
	e := &external{cluster: &target.Cluster{Client: c, Local: true}, record: event.NewNopRecorder()}
	if _, _, err := e.apply(context.Background(), ab); err != nil {
		t.Fatal(err)
	}
	// Read again: an apply's answer, read as an apply configuration, has no
	// managed fields.
	ch, err := e.children(context.Background(), ab, false)
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment's controller writes its status.
	ch.deployment.Status.ObservedGeneration = ch.deployment.Generation
	ch.deployment.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(context.Background(), ch.deployment, client.FieldOwner("kube-controller-manager")); err != nil {
		t.Fatal(err)
	}
	out := []client.Object{ch.deployment, ch.pvc}
	if ch.service != nil {
		out = append(out, ch.service)
	}
	for _, o := range out {
		o.SetResourceVersion("")
	}
	return out
}

// edit changes the object named like o with another field manager's update.
func edit[T client.Object](o T, mutate func(T)) func(context.Context, client.Client) error {
	return func(ctx context.Context, c client.Client) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		mutate(o)
		return c.Update(ctx, o, client.FieldOwner(otherManager))
	}
}

func editDeployment(mutate func(*appsv1.Deployment)) func(context.Context, client.Client) error {
	return edit(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}, mutate)
}

func editService(mutate func(*corev1.Service)) func(context.Context, client.Client) error {
	return edit(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}, mutate)
}

// world summarises the objects named like an AppBundle's: what they run, who
// they belong to; empty where there is none.
type world struct {
	Deployment, Claim, Service string
}

func worldOf(t *testing.T, c client.Client) world {
	t.Helper()
	ctx := context.Background()
	var w world
	get := func(name string, o client.Object) bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: name}, o)
		if err != nil && !kerrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	owner := func(o client.Object) string {
		if v, ok := o.GetLabels()[LabelOwner]; ok {
			return "owner=" + v
		}
		return "foreign"
	}
	if d := (&appsv1.Deployment{}); get("web", d) {
		var env []string
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			env = append(env, e.Name+"="+e.Value)
		}
		sort.Strings(env)
		var images []string
		for _, c := range d.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
		w.Deployment = fmt.Sprintf("%s %s %s env=%s", owner(d), strings.Join(images, ","), d.Spec.Strategy.Type, strings.Join(env, ","))
	}
	if p := (&corev1.PersistentVolumeClaim{}); get("web-data", p) {
		q := p.Spec.Resources.Requests[corev1.ResourceStorage]
		w.Claim = fmt.Sprintf("%s %s refs=%d", owner(p), q.String(), len(p.OwnerReferences))
	}
	if s := (&corev1.Service{}); get("web", s) {
		var ports []string
		for _, p := range s.Spec.Ports {
			ports = append(ports, fmt.Sprint(p.Port))
		}
		w.Service = fmt.Sprintf("%s %s %s", owner(s), s.Spec.Type, strings.Join(ports, ","))
	}
	return w
}

// Summaries of the objects as AppBundle web makes them.
const (
	madeDeployment = "owner=web nginx:1.21 Recreate env="
	madeClaim      = "owner=web 1Gi refs=0"
	madeService    = "owner=web ClusterIP 80"
	foreignDeploy  = "foreign postgres:16  env="
	foreignSvc     = "foreign  5432"
)

func foreignDeploymentRunning(selector map[string]string) client.Object {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres:16"}}}},
		},
	}
}

type fixture struct {
	objects []client.Object
	edit    func(context.Context, client.Client) error
}

func (f fixture) client(t *testing.T) client.Client {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithReturnManagedFields().WithObjects(f.objects...).Build()
	if f.edit != nil {
		if err := f.edit(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func errString(err error, prefix string) string {
	if err == nil {
		return ""
	}
	if prefix != "" && strings.HasPrefix(err.Error(), prefix) {
		// The message's start is what the test names.
		return prefix
	}
	return err.Error()
}

// set is a condition's status, empty where the condition is not set.
func set(s corev1.ConditionStatus) corev1.ConditionStatus {
	if s == corev1.ConditionUnknown {
		return ""
	}
	return s
}

func TestObserveFindsWhatIsMissingOrDrifted(t *testing.T) {
	type want struct {
		exists, upToDate bool
		ready            corev1.ConditionStatus
		storage          corev1.ConditionStatus
		endpoint         string
		err              string
	}
	cases := map[string]struct {
		reason string
		ab     *v1alpha1.AppBundle
		fixture
		want want
	}{
		"NothingYet": {
			reason: "A new bundle has nothing: not there, so it is created.",
			ab:     ab(),
			want:   want{},
		},
		"UpToDate": {
			reason:  "Objects as the bundle made them are up to date, and ready with an Available Deployment.",
			ab:      ab(withService, withEnv),
			fixture: fixture{objects: made(t, ab(withService, withEnv))},
			want:    want{exists: true, upToDate: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue, endpoint: "web.apps.svc"},
		},
		"ImageEdited": {
			reason: "Another manager's change of a field the bundle sets is drift.",
			ab:     ab(),
			fixture: fixture{objects: made(t, ab()), edit: editDeployment(func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Image = "evil:latest"
			})},
			want: want{exists: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue},
		},
		"EnvRemoved": {
			reason: "A variable the bundle sets, removed by another manager, is drift.",
			ab:     ab(withEnv),
			fixture: fixture{objects: made(t, ab(withEnv)), edit: editDeployment(func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Env = d.Spec.Template.Spec.Containers[0].Env[1:]
			})},
			want: want{exists: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue},
		},
		"EnvNoLongerWanted": {
			reason:  "A variable the bundle applied and no longer sets is drift: the next apply removes it.",
			ab:      ab(),
			fixture: fixture{objects: made(t, ab(withEnv))},
			want:    want{exists: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue},
		},
		"OthersFieldsAdded": {
			reason: "Fields another manager added (a variable, a limit, a port, replicas, an annotation, a sidecar) are theirs: no drift, no write.",
			ab:     ab(withEnv),
			fixture: fixture{objects: made(t, ab(withEnv)), edit: editDeployment(func(d *appsv1.Deployment) {
				c := &d.Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, corev1.EnvVar{Name: "FIGHTER", Value: "1"})
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
				c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
				d.Spec.Replicas = ptr.To[int32](5)
				d.Annotations = map[string]string{"example.com/owner": "team-a"}
				d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "envoy"})
			})},
			want: want{exists: true, upToDate: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue},
		},
		"QuantityInAnotherForm": {
			reason:  "A size written in another form of the same quantity is no drift.",
			ab:      ab(size("1024Mi")),
			fixture: fixture{objects: made(t, ab(size("1Gi")))},
			want:    want{exists: true, upToDate: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue},
		},
		"DeploymentDeleted": {
			reason:  "A missing Deployment is drift; the bundle is not ready without it.",
			ab:      ab(),
			fixture: fixture{objects: made(t, ab())[1:]},
			want:    want{exists: true, ready: corev1.ConditionFalse, storage: corev1.ConditionTrue},
		},
		"ServiceEdited": {
			reason: "A Service whose type another manager changed drifted.",
			ab:     ab(withService),
			fixture: fixture{objects: made(t, ab(withService)), edit: editService(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
			})},
			want: want{exists: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue, endpoint: "web.apps.svc"},
		},
		"ServiceNoLongerWanted": {
			reason:  "The bundle's Service, no longer wanted, is drift: Update deletes it.",
			ab:      ab(),
			fixture: fixture{objects: made(t, ab(withService))},
			want:    want{exists: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue},
		},
		"ClaimShrinkRefused": {
			reason:  "A claim never shrinks: the refusal shows in StorageSynced, and is no drift to write.",
			ab:      ab(size("500Mi")),
			fixture: fixture{objects: made(t, ab())},
			want:    want{exists: true, upToDate: true, ready: corev1.ConditionTrue, storage: corev1.ConditionFalse},
		},
		"ClaimPolicyChanged": {
			reason:  "Switching to the Delete policy adds an owner reference to the claim: drift.",
			ab:      ab(deletePolicy),
			fixture: fixture{objects: made(t, ab())},
			want:    want{exists: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue},
		},
		"ForeignDeployment": {
			reason:  "A same-named Deployment the bundle did not make is reported and left alone.",
			ab:      ab(),
			fixture: fixture{objects: []client.Object{foreignDeploymentRunning(map[string]string{"app": "web"})}},
			want:    want{err: `Deployment "web" exists and was not created by this AppBundle`},
		},
		"ForeignServiceUnwanted": {
			reason:  "A same-named Service the bundle does not want is none of its business.",
			ab:      ab(),
			fixture: fixture{objects: append(made(t, ab()), foreignService())},
			want:    want{exists: true, upToDate: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue},
		},
		"AdoptExistingDeployment": {
			reason:  "With adoptExisting a same-named Deployment is the bundle's, to be written.",
			ab:      ab(adopting),
			fixture: fixture{objects: []client.Object{foreignDeploymentRunning(selector(ab()))}},
			want:    want{exists: true, ready: corev1.ConditionFalse},
		},
		"AdoptExistingLeavesUnwantedService": {
			reason:  "adoptExisting takes only what the bundle wants: an unwanted Service is left alone.",
			ab:      ab(adopting),
			fixture: fixture{objects: append(made(t, ab()), foreignService())},
			want:    want{exists: true, upToDate: true, ready: corev1.ConditionTrue, storage: corev1.ConditionTrue},
		},
		"DeletingRetainedClaim": {
			reason:  "Being deleted under Retain, a bundle whose claim alone is left is gone.",
			ab:      ab(deletingBundle),
			fixture: fixture{objects: made(t, ab())[1:]},
			want:    want{},
		},
		"DeletingClaimUnderDelete": {
			reason:  "Being deleted under Delete, a bundle whose claim is left still exists.",
			ab:      ab(deletingBundle, deletePolicy),
			fixture: fixture{objects: made(t, ab(deletePolicy))[1:]},
			want:    want{exists: true},
		},
		"DeletingWithForeignDeployment": {
			reason:  "A foreign Deployment never keeps a bundle being deleted from going.",
			ab:      ab(deletingBundle),
			fixture: fixture{objects: []client.Object{foreignDeploymentRunning(map[string]string{"app": "web"})}},
			want:    want{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := tc.client(t)
			e := &external{cluster: &target.Cluster{Client: c, Local: true}, record: event.NewNopRecorder()}
			o, err := e.Observe(context.Background(), tc.ab)
			got := want{
				exists: o.ResourceExists, upToDate: o.ResourceUpToDate,
				ready:    set(tc.ab.GetCondition(xpv2.TypeReady).Status),
				storage:  set(tc.ab.GetCondition(TypeStorageSynced).Status),
				endpoint: string(o.ConnectionDetails[v1alpha1.AppBundleEndpointKey]),
				err:      errString(err, tc.want.err),
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCreateMakesClaimDeploymentAndService(t *testing.T) {
	type want struct {
		world    world
		endpoint string
		err      string
	}
	cases := map[string]struct {
		reason string
		ab     *v1alpha1.AppBundle
		fixture
		want want
	}{
		"Fresh": {
			reason: "A new bundle makes its claim, Deployment and Service.",
			ab:     ab(withService),
			want:   want{world: world{Deployment: madeDeployment, Claim: madeClaim, Service: madeService}, endpoint: "web.apps.svc"},
		},
		"ClaimLeftBehind": {
			reason:  "A claim a deleted bundle of the same name left is used again, as it is.",
			ab:      ab(),
			fixture: fixture{objects: made(t, ab())[1:]},
			want:    want{world: world{Deployment: madeDeployment, Claim: madeClaim}},
		},
		"ForeignDeployment": {
			reason:  "A same-named Deployment the bundle did not make is never taken over: nothing is written.",
			ab:      ab(),
			fixture: fixture{objects: []client.Object{foreignDeploymentRunning(map[string]string{"app": "web"})}},
			want:    want{world: world{Deployment: foreignDeploy}, err: `Deployment "web" exists and was not created by this AppBundle`},
		},
		"AdoptExisting": {
			reason:  "With adoptExisting a same-named Deployment is taken over: labelled, and running the bundle's container beside the others'.",
			ab:      ab(adopting),
			fixture: fixture{objects: []client.Object{foreignDeploymentRunning(selector(ab()))}},
			want:    want{world: world{Deployment: "owner=web postgres:16,nginx:1.21 Recreate env=", Claim: madeClaim}},
		},
		"AdoptExistingOtherSelector": {
			reason:  "A Deployment whose immutable selector differs cannot be adopted, and is left alone.",
			ab:      ab(adopting),
			fixture: fixture{objects: []client.Object{foreignDeploymentRunning(map[string]string{"app": "web"})}},
			want:    want{world: world{Deployment: foreignDeploy}, err: `cannot adopt Deployment "web": its selector app=web differs`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := tc.client(t)
			e := &external{cluster: &target.Cluster{Client: c, Local: true}, record: event.NewNopRecorder()}
			cr, err := e.Create(context.Background(), tc.ab)
			got := want{world: worldOf(t, c), endpoint: string(cr.ConnectionDetails[v1alpha1.AppBundleEndpointKey]), err: errString(err, tc.want.err)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nCreate(...): -want, +got:\n%s", tc.reason, diff)
			}
			if r := tc.ab.GetCondition(xpv2.TypeReady); r.Reason != xpv2.Creating().Reason {
				t.Errorf("Ready reason = %q after Create, want %q", r.Reason, xpv2.Creating().Reason)
			}
		})
	}
}

func TestUpdateRepairsWhatItSets(t *testing.T) {
	type want struct {
		world world
		ready corev1.ConditionStatus
		err   string
	}
	cases := map[string]struct {
		reason string
		ab     *v1alpha1.AppBundle
		fixture
		want want
	}{
		"RepairsWhatItSets": {
			reason: "An image another manager changed is restored; a variable it added is left.",
			ab:     ab(),
			fixture: fixture{objects: made(t, ab()), edit: editDeployment(func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Image = "evil:latest"
				d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "FIGHTER", Value: "1"}}
			})},
			want: want{world: world{Deployment: "owner=web nginx:1.21 Recreate env=FIGHTER=1", Claim: madeClaim}, ready: corev1.ConditionTrue},
		},
		"RemovesWhatItNoLongerSets": {
			reason:  "Variables the bundle applied and no longer sets are removed.",
			ab:      ab(),
			fixture: fixture{objects: made(t, ab(withEnv))},
			want:    want{world: world{Deployment: madeDeployment, Claim: madeClaim}, ready: corev1.ConditionTrue},
		},
		"RecreatesDeletedDeployment": {
			reason:  "A deleted Deployment is made again, and the bundle is not ready until it is Available.",
			ab:      ab(),
			fixture: fixture{objects: made(t, ab())[1:]},
			want:    want{world: world{Deployment: madeDeployment, Claim: madeClaim}, ready: corev1.ConditionFalse},
		},
		"SwitchesToRecreate": {
			reason: "A rolling Deployment is switched to Recreate, its rollingUpdate cleared.",
			ab:     ab(),
			fixture: fixture{objects: made(t, ab()), edit: editDeployment(func(d *appsv1.Deployment) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}}
			})},
			want: want{world: world{Deployment: madeDeployment, Claim: madeClaim}, ready: corev1.ConditionTrue},
		},
		"DeletesUnwantedService": {
			reason:  "The bundle's Service, no longer wanted, is deleted.",
			ab:      ab(),
			fixture: fixture{objects: made(t, ab(withService))},
			want:    want{world: world{Deployment: madeDeployment, Claim: madeClaim}, ready: corev1.ConditionTrue},
		},
		"ClaimShrinkNotWritten": {
			reason:  "A refused change of the claim is not written.",
			ab:      ab(size("500Mi")),
			fixture: fixture{objects: made(t, ab())},
			want:    want{world: world{Deployment: madeDeployment, Claim: madeClaim}, ready: corev1.ConditionTrue},
		},
		"ClaimPolicyChanged": {
			reason:  "Switching to the Delete policy writes the claim's owner reference.",
			ab:      ab(deletePolicy),
			fixture: fixture{objects: made(t, ab())},
			want:    want{world: world{Deployment: madeDeployment, Claim: "owner=web 1Gi refs=1"}, ready: corev1.ConditionTrue},
		},
		"ForeignService": {
			reason:  "A same-named Service the bundle did not make, now wanted, is reported and left alone.",
			ab:      ab(withService),
			fixture: fixture{objects: append(made(t, ab()), foreignService())},
			want:    want{world: world{Deployment: madeDeployment, Claim: madeClaim, Service: foreignSvc}, ready: corev1.ConditionTrue, err: `Service "web" exists and was not created by this AppBundle`},
		},
		"AdoptExistingService": {
			reason:  "With adoptExisting a same-named Service that is wanted is taken over: labelled, with the bundle's port beside the others'.",
			ab:      ab(withService, adopting),
			fixture: fixture{objects: append(made(t, ab()), foreignService())},
			want:    want{world: world{Deployment: madeDeployment, Claim: madeClaim, Service: "owner=web ClusterIP 5432,80"}, ready: corev1.ConditionTrue},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := tc.client(t)
			tc.ab.SetConditions(xpv2.Available())
			e := &external{cluster: &target.Cluster{Client: c, Local: true}, record: event.NewNopRecorder()}
			_, err := e.Update(context.Background(), tc.ab)
			got := want{world: worldOf(t, c), ready: tc.ab.GetCondition(xpv2.TypeReady).Status, err: errString(err, tc.want.err)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nUpdate(...): -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			// What Update wrote is what Observe wants: no second write.
			if o, err := e.Observe(context.Background(), tc.ab); err != nil || !o.ResourceUpToDate {
				t.Errorf("%s\nObserve after Update: up to date %t, %v; want up to date", tc.reason, o.ResourceUpToDate, err)
			}
		})
	}
}

func TestDeleteKeepsTheClaimByDefault(t *testing.T) {
	cases := map[string]struct {
		reason string
		ab     *v1alpha1.AppBundle
		fixture
		want world
	}{
		"KeepsClaim": {
			reason:  "The Deployment and Service go; the claim outlives the bundle by default.",
			ab:      ab(withService, deletingBundle),
			fixture: fixture{objects: made(t, ab(withService))},
			want:    world{Claim: madeClaim},
		},
		"DeletePolicy": {
			reason:  "Under the Delete policy the claim goes too.",
			ab:      ab(deletePolicy, deletingBundle),
			fixture: fixture{objects: made(t, ab(deletePolicy))},
			want:    world{},
		},
		"ForeignDeployment": {
			reason:  "A same-named Deployment the bundle did not make is left alone, and does not block the deletion of what it made.",
			ab:      ab(withService, deletingBundle),
			fixture: fixture{objects: append(made(t, ab(withService))[1:], foreignDeploymentRunning(map[string]string{"app": "web"}))},
			want:    world{Deployment: foreignDeploy, Claim: madeClaim},
		},
		"ForeignServiceAdopting": {
			reason:  "Even with adoptExisting, a Service the bundle did not make is not deleted with it.",
			ab:      ab(withService, adopting, deletingBundle),
			fixture: fixture{objects: append(made(t, ab()), foreignService())},
			want:    world{Claim: madeClaim, Service: foreignSvc},
		},
		"AlreadyGone": {
			reason: "Nothing to delete is no error.",
			ab:     ab(deletingBundle),
			want:   world{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := tc.client(t)
			e := &external{cluster: &target.Cluster{Client: c, Local: true}, record: event.NewNopRecorder()}
			if _, err := e.Delete(context.Background(), tc.ab); err != nil {
				t.Fatalf("%s\nDelete(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, worldOf(t, c)); diff != "" {
				t.Errorf("%s\nDelete(...): -want, +got:\n%s", tc.reason, diff)
			}
			if o, err := e.Observe(context.Background(), tc.ab); err != nil || o.ResourceExists {
				t.Errorf("%s\nObserve after Delete: exists %t, %v; want gone", tc.reason, o.ResourceExists, err)
			}
		})
	}
}

// eventLog records the reasons of the events sent to it.
type eventLog struct{ reasons []event.Reason }

func (l *eventLog) Event(_ runtime.Object, e event.Event)    { l.reasons = append(l.reasons, e.Reason) }
func (l *eventLog) WithAnnotations(...string) event.Recorder { return l }

// A refused storage change is told once per refused spec, not on every poll,
// and again when the spec changes and is refused anew.
func TestStorageRefusalEventOncePerSpec(t *testing.T) {
	log := &eventLog{}
	e := &external{record: log}
	ab := &v1alpha1.AppBundle{ObjectMeta: metav1.ObjectMeta{Name: "store", Generation: 2}}
	refused := pvcChange{Refused: `PersistentVolumeClaim "store-data" cannot shrink from 1Gi to 500Mi`}
	steps := []struct {
		generation int64
		change     pvcChange
		events     int
	}{
		{generation: 2, change: refused, events: 1},
		{generation: 2, change: refused, events: 1},
		{generation: 3, change: pvcChange{Refused: `PersistentVolumeClaim "store-data" cannot shrink from 1Gi to 400Mi`}, events: 2},
		{generation: 3, change: pvcChange{Refused: `PersistentVolumeClaim "store-data" cannot shrink from 1Gi to 400Mi`}, events: 2},
		{generation: 4, change: pvcChange{}, events: 2},
		{generation: 5, change: refused, events: 3},
	}
	for i, s := range steps {
		ab.Generation = s.generation
		e.setStorageCondition(ab, s.change)
		if len(log.reasons) != s.events {
			t.Fatalf("step %d: %d events, want %d (%v)", i, len(log.reasons), s.events, log.reasons)
		}
		c := ab.GetCondition(TypeStorageSynced)
		if want := s.change.Refused == ""; (c.Status == corev1.ConditionTrue) != want {
			t.Errorf("step %d: StorageSynced %s, want True=%t", i, c.Status, want)
		}
	}
}

// TestCreateUsesObservesReads: Create decides from the objects Observe read
// from the API server in the same reconcile, not from a second GET of each;
// a read after the writes goes to the API server again.
func TestCreateUsesObservesReads(t *testing.T) {
	gets := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme(t)).WithReturnManagedFields().Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		},
	})
	e := &external{cluster: &target.Cluster{Client: c, Local: true}, record: event.NewNopRecorder()}
	bundle := ab(withService)
	o, err := e.Observe(context.Background(), bundle)
	if err != nil || o.ResourceExists {
		t.Fatalf("Observe(...) = %+v, %v; want the bundle missing", o, err)
	}
	observed := gets
	if _, err := e.Create(context.Background(), bundle); err != nil {
		t.Fatal(err)
	}
	if got := gets - observed; got != 0 {
		t.Errorf("Create sent %d GETs after Observe's %d, want 0", got, observed)
	}
	if diff := cmp.Diff(world{Deployment: madeDeployment, Claim: madeClaim, Service: madeService}, worldOf(t, c)); diff != "" {
		t.Errorf("Create(...): -want, +got:\n%s", diff)
	}
	ch, err := e.children(context.Background(), bundle, false)
	if err != nil || ch.deployment == nil || ch.pvc == nil || ch.service == nil {
		t.Errorf("a read after Create's writes: %+v, %v; want every object", ch, err)
	}
}
