package configrollout

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
)

const testNamespace = "web"

var testNow = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.SchemeBuilder.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// newExternal is the external client of a ConfigRollout on a cluster that
// holds objs, as the API server would: no watches, no metadata cache (as on
// a remote cluster). writes counts the patches and applies it sends.
func newExternal(t *testing.T, objs ...client.Object) (e *external, c client.Client, writes *int) {
	t.Helper()
	writes = new(int)
	c = fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			*writes++
			return c.Patch(ctx, o, p, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, o runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			*writes++
			return c.Apply(ctx, o, opts...)
		},
	}).Build()
	return &external{cluster: &target.Cluster{ID: "test", Client: c}, record: event.NewNopRecorder(), now: func() time.Time { return testNow }}, c, writes
}

func rollout(mutate ...func(*v1alpha1.ConfigRollout)) *v1alpha1.ConfigRollout {
	cr := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "conf"}}
	cr.Spec.ForProvider.ConfigMaps = []v1alpha1.SourceRef{{Name: "app"}}
	cr.Spec.ForProvider.Workloads = []v1alpha1.WorkloadRef{{Kind: KindDeployment, Name: "api"}}
	for _, m := range mutate {
		m(cr)
	}
	return cr
}

func configMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "app"}, Data: map[string]string{"PORT": "80", "LOG_LEVEL": "info"}}
}

// allHash is the hash of ConfigMap app alone, read whole: what named workloads carry.
func allHash() string { return Combined([]string{Hash(ConfigMapContent(configMap(), nil))}) }

// portHash is what a workload that reads only key PORT of ConfigMap app carries in auto mode.
func portHash() string {
	return Combined([]string{Hash(ConfigMapContent(configMap(), []string{"PORT"}))})
}

func podTemplate(hash string, env ...corev1.EnvVar) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", Env: env}}},
	}
	if hash != "" {
		t.Annotations = map[string]string{AnnotationHash: hash}
	}
	return t
}

func deployment(name, hash, lock string, env ...corev1.EnvVar) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name}, Spec: appsv1.DeploymentSpec{Template: podTemplate(hash, env...)}}
	if lock != "" {
		d.Annotations = map[string]string{AnnotationLock: lock}
	}
	return d
}

// followed is a rollout whose status records baseline h for Deployment api:
// it followed api without rolling it.
func followed(h string, mutate ...func(*v1alpha1.ConfigRollout)) *v1alpha1.ConfigRollout {
	cr := rollout(mutate...)
	cr.Status.AtProvider.Workloads = []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: h, Baseline: true}}
	return cr
}

// locked puts the lock of rollout r on workload o.
func locked[T client.Object](o T, r string) T {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationLock] = r
	o.SetAnnotations(a)
	return o
}

func cronJob(name, hash string) *batchv1.CronJob {
	return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name}, Spec: batchv1.CronJobSpec{
		Schedule:    "0 3 * * *",
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate(hash)}},
	}}
}

func readsPort() corev1.EnvVar {
	return corev1.EnvVar{Name: "PORT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "PORT"}}}
}

func TestObserveRollsNothingOnAPartialView(t *testing.T) {
	type want struct {
		obs       managed.ExternalObservation
		ready     corev1.ConditionStatus
		message   string
		workloads []v1alpha1.RolledWorkload
	}
	cases := map[string]struct {
		reason string
		cr     *v1alpha1.ConfigRollout
		objs   []client.Object
		want   want
	}{
		"SourceMissing": {
			reason: "Nothing is rolled on a partial view of the configuration: up to date, not Ready, saying what is missing.",
			cr:     rollout(),
			objs:   []client.Object{deployment("api", "", "")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:     corev1.ConditionFalse,
				message:   `ConfigMap "app" does not exist: nothing is rolled until it does`,
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api"}},
			},
		},
		"WorkloadAdopted": {
			reason: "A workload the rollout starts to follow is not rolled: its baseline is recorded in status, and it counts as current.",
			cr:     rollout(),
			objs:   []client.Object{configMap(), deployment("api", "old", "")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:     corev1.ConditionTrue,
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: allHash(), Baseline: true}},
			},
		},
		"RollOnAdoption": {
			reason: "With rollOnAdoption a workload the rollout starts to follow is rolled.",
			cr:     rollout(func(cr *v1alpha1.ConfigRollout) { cr.Spec.ForProvider.RollOnAdoption = true }),
			objs:   []client.Object{configMap(), deployment("api", "", "")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false},
				ready:     corev1.ConditionFalse,
				message:   "1 workloads to roll",
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api"}},
			},
		},
		"BaselineCurrent": {
			reason: "A followed workload whose baseline is the current configuration is current: Ready, nothing to write.",
			cr:     followed(allHash()),
			objs:   []client.Object{configMap(), deployment("api", "", "")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:     corev1.ConditionTrue,
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: allHash(), Baseline: true}},
			},
		},
		"BaselineChanged": {
			reason: "A followed workload whose baseline is an older configuration is to be rolled.",
			cr:     followed("old"),
			objs:   []client.Object{configMap(), deployment("api", "", "")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false},
				ready:     corev1.ConditionFalse,
				message:   "1 workloads to roll",
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: "old", Baseline: true}},
			},
		},
		"WorkloadToRoll": {
			reason: "A followed workload that does not carry the hash is to be rolled.",
			cr:     rollout(),
			objs:   []client.Object{configMap(), deployment("api", "old", "conf")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false},
				ready:     corev1.ConditionFalse,
				message:   "1 workloads to roll",
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: "old"}},
			},
		},
		"Limited": {
			reason: "A workload rolled as often as the rollout limit allows within its window is not rolled: up to date, not Ready, saying when it rolls.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.RolloutLimit = &v1alpha1.RolloutLimit{Rollouts: 2, Within: &metav1.Duration{Duration: time.Minute}}
				cr.Status.AtProvider.Workloads = []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: "old", RecentRollouts: []metav1.Time{{Time: testNow.Add(-40 * time.Second)}, {Time: testNow.Add(-10 * time.Second)}}}}
			}),
			objs: []client.Object{configMap(), deployment("api", "old", "conf")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:     corev1.ConditionFalse,
				message:   "1 workloads rolled 2 times within 1m0s, the rolloutLimit: the first rolls again, to the configuration current then, at 2026-03-02T12:00:20Z (0 rolled, 0 in flight, 1 pending)",
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: "old", RecentRollouts: []metav1.Time{{Time: testNow.Add(-40 * time.Second)}, {Time: testNow.Add(-10 * time.Second)}}}},
			},
		},
		"LimitReleased": {
			reason: "Once the oldest counted rollout has left the window, the workload rolls.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.RolloutLimit = &v1alpha1.RolloutLimit{Rollouts: 2, Within: &metav1.Duration{Duration: time.Minute}}
				cr.Status.AtProvider.Workloads = []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: "old", RecentRollouts: []metav1.Time{{Time: testNow.Add(-60 * time.Second)}, {Time: testNow.Add(-10 * time.Second)}}}}
			}),
			objs: []client.Object{configMap(), deployment("api", "old", "conf")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false},
				ready:     corev1.ConditionFalse,
				message:   "1 workloads to roll",
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: "old", RecentRollouts: []metav1.Time{{Time: testNow.Add(-60 * time.Second)}, {Time: testNow.Add(-10 * time.Second)}}}},
			},
		},
		"Rolled": {
			reason: "A workload that carries the hash of all sources is current: Ready.",
			cr:     rollout(),
			objs:   []client.Object{configMap(), deployment("api", allHash(), "conf")},
			want: want{
				obs:   managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready: corev1.ConditionTrue,
				// Our lock on it says the hash it carries is ours: a rollout
				// whose status write was lost is counted.
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: allHash(), LastRollout: &metav1.Time{Time: testNow}, RecentRollouts: []metav1.Time{{Time: testNow}}}},
			},
		},
		"CronJobToRoll": {
			reason: "A CronJob is rolled through its job template's pod template.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.Workloads = []v1alpha1.WorkloadRef{{Kind: KindCronJob, Name: "nightly"}}
			}),
			objs: []client.Object{configMap(), locked(cronJob("nightly", ""), "conf")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false},
				ready:     corev1.ConditionFalse,
				message:   "1 workloads to roll",
				workloads: []v1alpha1.RolledWorkload{{Kind: KindCronJob, Name: "nightly"}},
			},
		},
		"CronJobRolled": {
			reason: "A CronJob whose job template carries the hash is current.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.Workloads = []v1alpha1.WorkloadRef{{Kind: KindCronJob, Name: "nightly"}}
			}),
			objs: []client.Object{configMap(), locked(cronJob("nightly", allHash()), "conf")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:     corev1.ConditionTrue,
				workloads: []v1alpha1.RolledWorkload{{Kind: KindCronJob, Name: "nightly", Hash: allHash(), LastRollout: &metav1.Time{Time: testNow}, RecentRollouts: []metav1.Time{{Time: testNow}}}},
			},
		},
		"AutoKeyRead": {
			reason: "In auto mode a workload that reads only key PORT carries the hash of that key alone, and is current with it.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.Workloads, cr.Spec.ForProvider.Auto = nil, true
			}),
			objs: []client.Object{configMap(), deployment("api", portHash(), "conf", readsPort()), deployment("bystander", "", "")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:     corev1.ConditionTrue,
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: portHash(), LastRollout: &metav1.Time{Time: testNow}, RecentRollouts: []metav1.Time{{Time: testNow}}}},
			},
		},
		"AutoCarriesAll": {
			reason: "In auto mode a workload rolled to the hash of all current content (by an earlier release) is current too.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.Workloads, cr.Spec.ForProvider.Auto = nil, true
			}),
			objs: []client.Object{configMap(), deployment("api", allHash(), "conf", readsPort())},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:     corev1.ConditionTrue,
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: allHash()}},
			},
		},
		"AutoKeyToRoll": {
			reason: "In auto mode a workload that reads key PORT and carries an older hash is to be rolled.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.Workloads, cr.Spec.ForProvider.Auto = nil, true
			}),
			objs: []client.Object{configMap(), deployment("api", "old", "conf", readsPort())},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false},
				ready:     corev1.ConditionFalse,
				message:   "1 workloads to roll",
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: "old"}},
			},
		},
		"LockedByAnother": {
			reason: "A workload that follows another ConfigRollout is not rolled by this one, which says so.",
			cr:     rollout(),
			objs:   []client.Object{configMap(), deployment("api", "old", "other")},
			want: want{
				obs:     managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:   corev1.ConditionFalse,
				message: `Deployment "api" follows ConfigRollout "other": a workload follows one ConfigRollout, so it is not rolled by this one`,
			},
		},
		"NamedWorkloadMissing": {
			reason: "A named workload that does not exist is reported.",
			cr:     rollout(),
			objs:   []client.Object{configMap()},
			want: want{
				obs:     managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:   corev1.ConditionFalse,
				message: "Deployment api does not exist",
			},
		},
		"Debounced": {
			reason: "Within the debounce window of a change, nothing is rolled yet, and the condition says until when.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.Debounce = &metav1.Duration{Duration: time.Minute}
			}),
			objs: []client.Object{configMap(), deployment("api", "old", "conf")},
			want: want{
				obs:       managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready:     corev1.ConditionFalse,
				message:   "1 workloads to roll after the debounce window, at 2026-03-02T12:01:00Z",
				workloads: []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "api", Hash: "old"}},
			},
		},
		"DeletedHoldingLocks": {
			reason: "A deleted rollout exists while it holds locks, for Delete to release them.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.SetDeletionTimestamp(&metav1.Time{Time: testNow})
			}),
			objs: []client.Object{deployment("api", allHash(), "conf")},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, ready: corev1.ConditionUnknown},
		},
		"DeletedHoldingNothing": {
			reason: "A deleted rollout that holds no lock is gone.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.SetDeletionTimestamp(&metav1.Time{Time: testNow})
			}),
			objs: []client.Object{deployment("api", allHash(), "other")},
			want: want{obs: managed.ExternalObservation{ResourceExists: false}, ready: corev1.ConditionUnknown},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, _, writes := newExternal(t, tc.objs...)
			obs, err := e.Observe(context.Background(), tc.cr)
			if *writes > 0 {
				t.Errorf("\n%s\nObserve(...) wrote %d times: it never changes the outside world", tc.reason, *writes)
			}
			if err != nil {
				t.Fatalf("\n%s\nObserve(...): %v", tc.reason, err)
			}
			c := tc.cr.GetCondition(xpv2.TypeReady)
			got := want{obs: obs, ready: c.Status, message: c.Message, workloads: tc.cr.Status.AtProvider.Workloads}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// Observe reads the sources and the workloads at once: a change is rolled
// after one round trip to the API server, not two. The ConfigMap's read here
// returns only once the Deployment's has begun, which it never would if the
// two were read one after the other.
func TestObserveReadsSourcesAndWorkloadsAtOnce(t *testing.T) {
	workloadRead := make(chan struct{})
	var once sync.Once
	sequential := false
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(configMap(), deployment("api", "", "")).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			switch o.(type) {
			case *corev1.ConfigMap:
				select {
				case <-workloadRead:
				case <-time.After(5 * time.Second):
					sequential = true
				}
			case *appsv1.Deployment:
				once.Do(func() { close(workloadRead) })
			}
			return c.Get(ctx, key, o, opts...)
		},
	}).Build()
	e := &external{cluster: &target.Cluster{ID: "test", Client: c}, record: event.NewNopRecorder(), now: func() time.Time { return testNow }}
	obs, err := e.Observe(context.Background(), followed("old"))
	if err != nil {
		t.Fatal(err)
	}
	if sequential {
		t.Errorf("the ConfigMap was read before the Deployment's read began: one after the other")
	}
	if obs.ResourceUpToDate {
		t.Errorf("a Deployment that runs an older configuration is up to date")
	}
}

// carried is the hash workload kind/name's pod template carries on c, and the
// lock on it.
func carried(t *testing.T, c client.Client, kind, name string) (hash, lock string) {
	t.Helper()

	t.Helper()
	o, tmpl := newObject(kind)
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: name}, o); err != nil {
		t.Fatal(err)
	}
	return tmpl.Annotations[AnnotationHash], o.GetAnnotations()[AnnotationLock]
}

func TestUpdateFollowsThenRollsWorkloads(t *testing.T) {
	type rolled struct {
		Kind, Name, Hash, Lock string
		Baseline               bool
	}
	type want struct {
		rolled   []rolled
		writes   int
		rollouts int64
		ready    corev1.ConditionStatus
	}
	auto := func(cr *v1alpha1.ConfigRollout) { cr.Spec.ForProvider.Workloads, cr.Spec.ForProvider.Auto = nil, true }
	cases := map[string]struct {
		reason string
		cr     *v1alpha1.ConfigRollout
		objs   []client.Object
		want   want
	}{
		"FollowsDeployment": {
			reason: "A workload the rollout starts to follow is not written to: its baseline is in status, and no rollout is counted.",
			cr:     rollout(),
			objs:   []client.Object{configMap(), deployment("api", "old", "")},
			want:   want{rolled: []rolled{{KindDeployment, "api", "old", "", true}}, ready: corev1.ConditionTrue},
		},
		"FollowsWithinDebounce": {
			reason: "A debounce window holds back rollouts, not the baseline of a new workload.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.Workloads = append(cr.Spec.ForProvider.Workloads, v1alpha1.WorkloadRef{Kind: KindDeployment, Name: "new"})
				cr.Spec.ForProvider.Debounce = &metav1.Duration{Duration: time.Minute}
			}),
			objs: []client.Object{configMap(), deployment("api", "old", "conf"), deployment("new", "", "")},
			want: want{rolled: []rolled{{KindDeployment, "api", "old", "conf", false}, {KindDeployment, "new", "", "", true}}, ready: corev1.ConditionFalse},
		},
		"RollsOnAdoption": {
			reason: "With rollOnAdoption a workload the rollout starts to follow gets the hash in its pod template, and the lock; the rollout is counted.",
			cr:     rollout(func(cr *v1alpha1.ConfigRollout) { cr.Spec.ForProvider.RollOnAdoption = true }),
			objs:   []client.Object{configMap(), deployment("api", "old", "")},
			want:   want{rolled: []rolled{{KindDeployment, "api", allHash(), "conf", false}}, writes: 1, rollouts: 1, ready: corev1.ConditionTrue},
		},
		"RollsDeployment": {
			reason: "A followed workload that does not carry the hash gets it in its pod template; the rollout is counted.",
			cr:     rollout(),
			objs:   []client.Object{configMap(), deployment("api", "old", "conf")},
			want:   want{rolled: []rolled{{KindDeployment, "api", allHash(), "conf", false}}, writes: 1, rollouts: 1, ready: corev1.ConditionTrue},
		},
		"RollsCronJob": {
			reason: "A CronJob gets the hash in its job template's pod template, so its next Job uses the new configuration.",
			cr: rollout(func(cr *v1alpha1.ConfigRollout) {
				cr.Spec.ForProvider.Workloads = []v1alpha1.WorkloadRef{{Kind: KindCronJob, Name: "nightly"}, {Kind: KindDeployment, Name: "api"}}
			}),
			objs: []client.Object{configMap(), locked(cronJob("nightly", ""), "conf"), deployment("api", allHash(), "conf")},
			want: want{rolled: []rolled{{KindCronJob, "nightly", allHash(), "conf", false}, {KindDeployment, "api", allHash(), "conf", false}}, writes: 1, rollouts: 2, ready: corev1.ConditionTrue},
		},
		"AutoRollsToKeyHash": {
			reason: "In auto mode a workload that reads key PORT alone gets the hash of that key; one that reads the whole ConfigMap gets the hash of all of it.",
			cr:     followed("old", auto),
			objs: []client.Object{configMap(), deployment("api", "", "", readsPort()), func() client.Object {
				d := deployment("all", "old", "conf")
				d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}
				return d
			}()},
			want: want{rolled: []rolled{{KindDeployment, "all", allHash(), "conf", false}, {KindDeployment, "api", portHash(), "conf", false}}, writes: 2, rollouts: 2, ready: corev1.ConditionTrue},
		},
		"NothingToRoll": {
			reason: "A rollout whose workloads are current writes nothing.",
			cr:     rollout(),
			objs:   []client.Object{configMap(), deployment("api", allHash(), "conf")},
			want:   want{rolled: []rolled{{KindDeployment, "api", allHash(), "conf", false}}, rollouts: 1, ready: corev1.ConditionTrue},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c, writes := newExternal(t, tc.objs...)
			obs, err := e.Observe(context.Background(), tc.cr)
			if err != nil {
				t.Fatalf("\n%s\nObserve(...): %v", tc.reason, err)
			}
			// As the managed reconciler does.
			if !obs.ResourceUpToDate {
				if _, err := e.Update(context.Background(), tc.cr); err != nil {
					t.Fatalf("\n%s\nUpdate(...): %v", tc.reason, err)
				}
			}
			got := want{writes: *writes, rollouts: tc.cr.Status.AtProvider.Rollouts, ready: tc.cr.GetCondition(xpv2.TypeReady).Status}
			for _, w := range tc.cr.Status.AtProvider.Workloads {
				h, l := carried(t, c, w.Kind, w.Name)
				if h != w.Hash && !w.Baseline {
					t.Errorf("\n%s\nstatus says %s %s carries %q, it carries %q", tc.reason, w.Kind, w.Name, w.Hash, h)
				}
				got.rolled = append(got.rolled, rolled{w.Kind, w.Name, h, l, w.Baseline})
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nUpdate(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCreateWritesNothing(t *testing.T) {
	e, c, _ := newExternal(t, configMap(), deployment("api", "", ""))
	if _, err := e.Create(context.Background(), rollout()); err != nil {
		t.Fatalf("Create(...): %v", err)
	}
	if h, l := carried(t, c, KindDeployment, "api"); h != "" || l != "" {
		t.Errorf("Create(...) wrote hash %q and lock %q: a ConfigRollout has nothing to create", h, l)
	}
}

func TestDeleteReleasesLocksAndKeepsHashes(t *testing.T) {
	type lockOf struct{ Name, Hash, Lock string }
	cases := map[string]struct {
		reason string
		objs   []client.Object
		want   []lockOf
		writes int
	}{
		"ReleasesItsLocks": {
			reason: "Delete releases the rollout's locks and leaves the hashes: removing them would roll the workloads.",
			objs:   []client.Object{deployment("api", "h", "conf"), deployment("other", "h", "other")},
			want:   []lockOf{{"api", "h", ""}, {"other", "h", "other"}},
			writes: 1,
		},
		"NothingHeld": {
			reason: "Delete of a rollout that holds nothing succeeds and writes nothing.",
			objs:   []client.Object{deployment("api", "", "")},
			want:   []lockOf{{"api", "", ""}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c, writes := newExternal(t, tc.objs...)
			if _, err := e.Delete(context.Background(), rollout()); err != nil {
				t.Fatalf("\n%s\nDelete(...): %v", tc.reason, err)
			}
			var got []lockOf
			for _, o := range tc.objs {
				h, l := carried(t, c, KindDeployment, o.GetName())
				got = append(got, lockOf{o.GetName(), h, l})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nDelete(...): -want, +got:\n%s", tc.reason, diff)
			}
			if *writes != tc.writes {
				t.Errorf("\n%s\nDelete(...) wrote %d times, want %d", tc.reason, *writes, tc.writes)
			}
		})
	}
}
