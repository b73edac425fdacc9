package configrollout

import (
	"context"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// A workload event reaches the rollouts that name it, hold its lock or
// select it, and of the automatic ones only those whose sources its pod
// template reads: that is read once per generation from the API server, and
// not at all while the namespace has at most one automatic rollout.
func TestReferencingReachesOnlyConcernedRollouts(t *testing.T) {
	auto := func(name string, cms, secrets []string) *v1alpha1.ConfigRollout {
		cr := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name}}
		cr.Spec.ForProvider.Auto = true
		for _, n := range cms {
			cr.Spec.ForProvider.ConfigMaps = append(cr.Spec.ForProvider.ConfigMaps, v1alpha1.SourceRef{Name: n})
		}
		for _, n := range secrets {
			cr.Spec.ForProvider.Secrets = append(cr.Spec.ForProvider.Secrets, v1alpha1.SourceRef{Name: n})
		}
		return cr
	}
	named := rollout(func(cr *v1alpha1.ConfigRollout) { cr.Name = "named" })
	selector := rollout(func(cr *v1alpha1.ConfigRollout) {
		cr.Name, cr.Spec.ForProvider.Workloads = "selector", nil
		cr.Spec.ForProvider.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}
	})
	otherSelector := rollout(func(cr *v1alpha1.ConfigRollout) {
		cr.Name, cr.Spec.ForProvider.Workloads = "other-selector", nil
		cr.Spec.ForProvider.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}
	})
	// api reads ConfigMap app whole and key tls.crt of Secret certs.
	api := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "api", Generation: 3, Labels: map[string]string{"tier": "web"}}}
	api.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
		Env: []corev1.EnvVar{{Name: "CRT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "certs"}, Key: "tls.crt"}}}}}}
	meta := func(generation int64, lock string) client.Object {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "api", Generation: generation, Labels: api.Labels}}
		if lock != "" {
			m.Annotations = map[string]string{AnnotationLock: lock}
		}
		return m
	}
	type call struct {
		o       client.Object
		deleted bool
		listed  bool // in the watch's first list
		want    []string
		reads   int
	}
	cases := map[string]struct {
		rollouts []client.Object
		gone     bool  // the workload is no longer on the API server
		apiErr   error // reading it fails
		calls    []call
	}{
		"NamedLockedAndSelected": {
			rollouts: []client.Object{named, selector, otherSelector},
			calls:    []call{{o: meta(3, "elsewhere"), want: []string{"elsewhere", "named", "selector"}}},
		},
		"TheOnlyAutoRolloutWithoutARead": {
			rollouts: []client.Object{auto("a", []string{"unrelated"}, nil)},
			calls:    []call{{o: meta(3, ""), want: []string{"a"}}},
		},
		"OnlyTheAutoRolloutsWhoseSourcesItReads": {
			rollouts: []client.Object{auto("app", []string{"app"}, nil), auto("certs", nil, []string{"certs"}), auto("other", []string{"other"}, []string{"app"}), auto("both", []string{"x", "app"}, nil)},
			calls: []call{
				{o: meta(3, ""), want: []string{"app", "both", "certs"}, reads: 1},
				// Known at this generation: an annotation change reads nothing.
				{o: meta(3, "app"), want: []string{"app", "both", "certs"}},
				// A new template is read again.
				{o: meta(4, ""), want: []string{"app", "both", "certs"}, reads: 1},
				// A deletion uses what was known, and forgets it.
				{o: meta(4, ""), deleted: true, want: []string{"app", "both", "certs"}},
				{o: meta(4, ""), deleted: true, want: []string{"app", "both", "certs", "other"}},
			},
		},
		"AllAutoRolloutsWhenItCannotBeRead": {
			rollouts: []client.Object{auto("app", []string{"app"}, nil), auto("other", []string{"other"}, nil)},
			apiErr:   kerrors.NewServiceUnavailable("etcd is away"),
			calls:    []call{{o: meta(3, ""), want: []string{"app", "other"}, reads: 1}},
		},
		// As the provider starts, every rollout is reconciled and learns what
		// its namespace's workloads read in a list of them: the first list's
		// events read nothing, one by one.
		"NoReadInTheFirstList": {
			rollouts: []client.Object{auto("app", []string{"app"}, nil), auto("other", []string{"other"}, nil)},
			calls:    []call{{o: meta(3, ""), listed: true}},
		},
		// With one automatic rollout, that one, as for any event.
		"TheOnlyAutoRolloutInTheFirstList": {
			rollouts: []client.Object{auto("a", []string{"unrelated"}, nil)},
			calls:    []call{{o: meta(3, ""), listed: true, want: []string{"a"}}},
		},
		// Its deletion event, which follows, reaches every automatic rollout.
		"NoAutoRolloutWhenItIsGone": {
			rollouts: []client.Object{auto("app", []string{"app"}, nil), auto("other", []string{"other"}, nil)},
			gone:     true,
			calls:    []call{{o: meta(3, "app"), want: []string{"app"}, reads: 1}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tc.rollouts...).
				WithIndex(&v1alpha1.ConfigRollout{}, indexWorkloads, indexValues).Build()
			var objs []client.Object
			if !tc.gone {
				objs = append(objs, api.DeepCopy())
			}
			reads := 0
			apiReader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
					reads++
					if tc.apiErr != nil {
						return tc.apiErr
					}
					return c.Get(ctx, key, o, opts...)
				},
			}).Build()
			rd := newReaders(apiReader)
			autos := newAutoRollouts()
			for _, o := range tc.rollouts {
				autos.set(o)
			}
			for i, call := range tc.calls {
				before := reads
				var got []string
				h := watchset.Changed
				switch {
				case call.deleted:
					h = watchset.Gone
				case call.listed:
					h = watchset.Listed
				}
				for _, r := range referencing(context.Background(), c, rd, autos, KindDeployment, call.o, h) {
					got = append(got, r.Name)
				}
				sort.Strings(got)
				if diff := cmp.Diff(call.want, got); diff != "" {
					t.Errorf("call %d: rollouts enqueued: -want, +got:\n%s", i, diff)
				}
				if r := reads - before; r != call.reads {
					t.Errorf("call %d: %d reads of the workload, want %d", i, r, call.reads)
				}
			}
		})
	}
}

// Reconciles and events that ask at once what a workload not yet known
// reads share one read of it, and only the caller whose read it was gets the
// object to use (the others would share it).
func TestReadersShareARead(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "api", Generation: 2}}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}}
	started, release := make(chan struct{}), make(chan struct{})
	var reads atomic.Int32
	api := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(d).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			if reads.Add(1) == 1 {
				close(started)
			}
			<-release
			return c.Get(ctx, key, o, opts...)
		},
	}).Build()
	rd := newReaders(api)
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "api", Generation: 2}}
	const callers = 8
	type result struct {
		srcs []string
		read client.Object
		err  error
	}
	results := make(chan result, callers)
	for range callers {
		go func() {
			srcs, read, err := rd.sources(context.Background(), KindDeployment, m)
			results <- result{srcs, read, err}
		}()
	}
	<-started
	// Callers that come after the read ended find it known; either way
	// there is one read.
	time.Sleep(50 * time.Millisecond)
	close(release)
	withObject := 0
	for range callers {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if diff := cmp.Diff([]string{autoSource(KindConfigMap, "app")}, r.srcs); diff != "" {
			t.Errorf("sources: -want, +got:\n%s", diff)
		}
		if r.read != nil {
			withObject++
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads of the workload, want 1", n)
	}
	if withObject > 1 {
		t.Errorf("%d callers got the object read, want at most 1", withObject)
	}
}

// An auto rollout finds its workloads by what they are known to read: on
// its first look in a namespace every workload there is learned, and later
// only those whose events carried a generation not known (a new template),
// not every workload of the namespace again.
func TestAutoSelectLearnsOnlyWhatChanged(t *testing.T) {
	reading := func(name string, generation int64, cm string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, Generation: generation}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}
		return d
	}
	meta := func(d *appsv1.Deployment) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name, Generation: d.Generation}}
	}
	a, b, c := reading("a", 1, "app"), reading("b", 1, "other"), reading("c", 1, "app")
	var reads []string
	api := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, b, c).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			reads = append(reads, key.Name)
			return c.Get(ctx, key, o, opts...)
		},
	}).Build()
	// gone is in the cache and no longer on the API server: its deletion
	// event is still to come.
	gone := reading("gone", 1, "app")
	cache := metadataCache{items: map[string][]metav1.PartialObjectMetadata{KindDeployment: {meta(a), meta(b), meta(c), meta(gone)}}}
	rd := newReaders(api)
	// An event before any auto rollout looked in the namespace is not noted.
	rd.seen(KindDeployment, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "a", Generation: 1}})
	cr := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "r"}}
	cr.Spec.ForProvider.Auto = true
	cr.Spec.ForProvider.ConfigMaps = []v1alpha1.SourceRef{{Name: "app"}}
	ctx := context.Background()
	check := func(step string, want, wantReads []string) {
		t.Helper()
		reads = nil
		ws, _, err := selectWorkloads(ctx, api, cache, rd, cr)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		var got []string
		for _, w := range ws {
			got = append(got, w.Name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: workloads selected: -want, +got:\n%s", step, diff)
		}
		sort.Strings(reads)
		if diff := cmp.Diff(wantReads, reads); diff != "" {
			t.Errorf("%s: workloads read: -want, +got:\n%s", step, diff)
		}
	}
	// Each is read once, and a and c are rolled as read.
	check("first look", []string{"a", "c"}, []string{"a", "b", "c", "gone"})
	// gone's deletion event comes.
	rd.forget(KindDeployment, gone)
	// Known: only the two to roll are read.
	check("again", []string{"a", "c"}, []string{"a", "c"})
	if s, many := rd.unread(testNamespace, KindDeployment, listFrom); len(s) != 0 || many {
		t.Errorf("still unread: %v", s)
	}
	// b now reads app too: its event notes it, and it alone is learned.
	b2 := reading("b", 2, "app")
	if err := api.Update(ctx, withVersion(t, api, b2)); err != nil {
		t.Fatal(err)
	}
	rd.seen(KindDeployment, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "b", Generation: 2}})
	check("b reads app", []string{"a", "b", "c"}, []string{"a", "b", "c"})
	// c is deleted: forgotten with its event.
	if err := api.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	rd.forget(KindDeployment, c)
	check("c deleted", []string{"a", "b"}, []string{"a", "b"})
}

// withVersion sets o's resourceVersion to the one c holds, for an update.
func withVersion(t *testing.T, c client.Client, o client.Object) client.Object {
	t.Helper()
	cur := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), cur); err != nil {
		t.Fatal(err)
	}
	o.SetResourceVersion(cur.ResourceVersion)
	return o
}

// The auto rollouts of each namespace are counted from the ConfigRollout
// informer's events: a rollout that stops being auto, or is deleted (also
// when the watch missed the deletion), no longer counts.
func TestAutoRollouts(t *testing.T) {
	autoIn := func(ns, name string) *v1alpha1.ConfigRollout {
		cr := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		cr.Spec.ForProvider.Auto = true
		return cr
	}
	a := newAutoRollouts()
	h := a.handler()
	check := func(step, ns, wantOnly string, wantN int) {
		t.Helper()
		if only, n := a.in(ns); only != wantOnly || n != wantN {
			t.Errorf("%s: in(%q) = %q, %d; want %q, %d", step, ns, only, n, wantOnly, wantN)
		}
	}
	check("none", "web", "", 0)
	h.OnAdd(autoIn("web", "a"), false)
	check("one", "web", "a", 1)
	h.OnAdd(autoIn("web", "b"), false)
	h.OnAdd(autoIn("db", "c"), false)
	h.OnAdd(rollout(func(cr *v1alpha1.ConfigRollout) { cr.Namespace, cr.Name = "web", "named" }), false)
	check("two and a named one", "web", "", 2)
	check("another namespace", "db", "c", 1)
	named := autoIn("web", "b")
	named.Spec.ForProvider.Auto, named.Spec.ForProvider.Workloads = false, []v1alpha1.WorkloadRef{{Kind: KindDeployment, Name: "api"}}
	h.OnUpdate(autoIn("web", "b"), named)
	check("b names its workload now", "web", "a", 1)
	h.OnAdd(autoIn("web", "d"), false)
	if diff := cmp.Diff([]string{"a", "d"}, a.all("web")); diff != "" {
		t.Errorf("all: -want, +got:\n%s", diff)
	}
	h.OnDelete(autoIn("web", "a"))
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "web/d", Obj: autoIn("web", "d")})
	check("deleted", "web", "", 0)
	// Relabelled between two shards of a replica: added by the new shard's
	// cache before the old one's deletes it, it still counts.
	under := func(s string) *v1alpha1.ConfigRollout {
		cr := autoIn("web", "moved")
		cr.Labels = map[string]string{shard.Label: s}
		return cr
	}
	h.OnAdd(under("1"), false)
	h.OnAdd(under("2"), false)
	h.OnDelete(under("1"))
	check("moved from shard 1 to 2, added first", "web", "moved", 1)
	h.OnDelete(under("2"))
	check("deleted under its shard", "web", "", 0)
}
