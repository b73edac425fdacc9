package copyrule

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// recorder keeps the events' messages.
type recorder struct{ events []string }

func (r *recorder) Event(_ runtime.Object, e event.Event) {
	r.events = append(r.events, string(e.Type)+" "+string(e.Reason)+": "+e.Message)
}
func (r *recorder) WithAnnotations(...string) event.Recorder { return r }

// newExternal is the rule's external client on a fake cluster holding objs,
// reaching every namespace but kube-system. Its watches go to an API server
// that refuses them, so they never sync and the client reads namespaces from
// the fake cluster, as it does before its namespaces watch has synced.
func newExternal(t *testing.T, objs ...client.Object) (*external, client.Client, *recorder) {
	t.Helper()
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(refuse.Close)
	ws := watchset.New(logging.NewNopLogger())
	ctx, stop := context.WithCancel(context.Background())
	go func() { _ = ws.Start(ctx) }()
	t.Cleanup(stop)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	rec := &recorder{}
	cl := &target.Cluster{ID: "fake", Client: c, Config: &rest.Config{Host: refuse.URL}, Local: true, Reach: reach.Policy{OwnNamespace: true, Namespaces: []string{"*"}, Denied: []string{"kube-system"}}}
	return &external{cluster: cl, record: rec, watches: ws, known: newKnownCopies(), now: func() time.Time { return time.Unix(1700000000, 0) }}, c, rec
}

func ns(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func cmObj(ns, name string, data, lbls map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}, Data: data}
}

func copyRule(p v1alpha1.CopyRuleParameters) *v1alpha1.CopyRule {
	if p.ConflictPolicy == "" {
		p.ConflictPolicy = v1alpha1.ConflictSkip
	}
	return &v1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "share", UID: "uid-1"}, Spec: v1alpha1.CopyRuleSpec{ForProvider: p}}
}

// copyOf is the copy of source s in namespace ns as rule cr writes it.
func copyOf(t *testing.T, cr *v1alpha1.CopyRule, s client.Object, ns string) client.Object {
	t.Helper()
	var src Object
	switch o := s.(type) {
	case *corev1.ConfigMap:
		src = FromConfigMap(o)
	case *corev1.Secret:
		src = FromSecret(o)
	}
	d, err := NewTransform(cr.Spec.ForProvider).Apply(src)
	if err != nil {
		t.Fatal(err)
	}
	c := Desired(owner(cr), d, Hash(d), ns, nil, false)
	return c.ToAPI(copyKindOf(cr.Spec.ForProvider))
}

// contents lists the ConfigMaps and Secrets outside the platform namespace,
// as kind, namespace/name and data (a Secret's only counted).
func contents(t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	cms := &corev1.ConfigMapList{}
	secrets := &corev1.SecretList{}
	if err := c.List(context.Background(), cms); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), secrets); err != nil {
		t.Fatal(err)
	}
	for _, o := range cms.Items {
		if o.Namespace != "platform" {
			out = append(out, fmt.Sprintf("ConfigMap %s/%s %v", o.Namespace, o.Name, o.Data))
		}
	}
	for _, o := range secrets.Items {
		if o.Namespace != "platform" {
			out = append(out, fmt.Sprintf("Secret %s/%s %d keys", o.Namespace, o.Name, len(o.Data)))
		}
	}
	sort.Strings(out)
	return out
}

func TestObserveReportsWhatTheRuleMustWrite(t *testing.T) {
	src := cmObj("platform", "settings", map[string]string{"k": "v"}, map[string]string{"share": "yes"})
	byName := copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Names: []string{"settings"}, Namespaces: []string{"team-a"}})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"host": []byte("db"), "password": []byte("hunter2")}}
	into := copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindSecret, Into: v1alpha1.KindConfigMap, Names: []string{"db"}, Namespaces: []string{"team-a"}, Keys: &v1alpha1.CopyKeys{Include: []string{"host"}}})
	collide := copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindSecret, Names: []string{"db"}, Namespaces: []string{"team-a"}, Keys: &v1alpha1.CopyKeys{Rename: map[string]v1alpha1.DataKey{"host": "password"}}})
	deleted := func(cr *v1alpha1.CopyRule) *v1alpha1.CopyRule {
		d := cr.DeepCopy()
		now := metav1.Now()
		d.DeletionTimestamp = &now
		return d
	}

	type want struct {
		o        managed.ExternalObservation
		err      bool
		copies   string
		ready    corev1.ConditionStatus
		problems []string
	}
	cases := map[string]struct {
		reason string
		objs   []client.Object
		cr     *v1alpha1.CopyRule
		want   want
	}{
		"NoSource": {
			reason: "A rule whose source does not exist exists, is up to date and Ready: no copies is a valid state.",
			objs:   []client.Object{ns("platform"), ns("team-a")},
			cr:     byName,
			want:   want{o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, copies: "0/0", ready: corev1.ConditionTrue},
		},
		"MissingCopy": {
			reason: "A missing copy makes the rule out of date and not Ready; Observe writes nothing.",
			objs:   []client.Object{ns("platform"), ns("team-a"), src},
			cr:     byName,
			want:   want{o: managed.ExternalObservation{ResourceExists: true}, copies: "0/1", ready: corev1.ConditionFalse},
		},
		"InSync": {
			reason: "A copy equal to its source needs no write.",
			objs:   []client.Object{ns("platform"), ns("team-a"), src, copyOf(t, byName, src, "team-a")},
			cr:     byName,
			want:   want{o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, copies: "1/1", ready: corev1.ConditionTrue},
		},
		"MissingNamespace": {
			reason: "A listed namespace that does not exist is a problem, not an error.",
			objs:   []client.Object{ns("platform"), src},
			cr:     byName,
			want:   want{o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, copies: "0/0", ready: corev1.ConditionTrue, problems: []string{"NamespaceMissing team-a/settings"}},
		},
		"IntoConfigMapInSync": {
			reason: "A Secret's included keys in a ConfigMap copy are compared as the rule transforms them.",
			objs:   []client.Object{ns("platform"), ns("team-a"), secret, copyOf(t, into, secret, "team-a")},
			cr:     into,
			want:   want{o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, copies: "1/1", ready: corev1.ConditionTrue},
		},
		"KeysCollide": {
			reason: "Keys that would collide: nothing to write, the source is reported and the rule is not Ready.",
			objs:   []client.Object{ns("platform"), ns("team-a"), secret},
			cr:     collide,
			want:   want{o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, copies: "0/1", ready: corev1.ConditionFalse, problems: []string{"Refused platform/db"}},
		},
		"CopyNameSeveralSources": {
			reason: "copyName with a source in each of two source namespaces: both would write the one copy name, so it is a reported conflict and nothing is written.",
			objs:   []client.Object{ns("platform"), ns("shared"), ns("team-a"), src, cmObj("shared", "settings", map[string]string{"k": "other"}, nil)},
			cr:     copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, SourceNamespaces: []string{"platform", "shared"}, Names: []string{"settings"}, CopyName: "app-settings", Namespaces: []string{"team-a"}}),
			want:   want{o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, copies: "0/1", ready: corev1.ConditionFalse, problems: []string{"SourceConflict platform/app-settings"}},
		},
		"SourceOutOfReach": {
			reason: "A source namespace out of reach is an error and makes the rule Unavailable.",
			objs:   []client.Object{ns("platform"), ns("kube-system"), ns("team-a")},
			cr:     copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, SourceNamespace: "kube-system", Names: []string{"x"}, Namespaces: []string{"team-a"}}),
			want:   want{err: true, ready: corev1.ConditionFalse},
		},
		"DeletedWithCopies": {
			reason: "A deleted rule exists while copies in reach remain, so Delete runs.",
			objs:   []client.Object{ns("platform"), ns("team-a"), src, copyOf(t, byName, src, "team-a")},
			cr:     deleted(byName),
			want:   want{o: managed.ExternalObservation{ResourceExists: true}},
		},
		"DeletedWithoutCopies": {
			reason: "A deleted rule without copies is gone.",
			objs:   []client.Object{ns("platform"), ns("team-a"), src},
			cr:     deleted(byName),
			want:   want{o: managed.ExternalObservation{ResourceExists: false}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c, _ := newExternal(t, tc.objs...)
			before := contents(t, c)
			cr := tc.cr.DeepCopy()
			got, err := e.Observe(context.Background(), cr)
			if (err != nil) != tc.want.err {
				t.Fatalf("%s\nObserve(...): error %v, want error %t", tc.reason, err, tc.want.err)
			}
			if diff := cmp.Diff(tc.want.o, got); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before, contents(t, c)); diff != "" {
				t.Errorf("%s\nObserve(...) changed the cluster: -before, +after:\n%s", tc.reason, diff)
			}
			if cr.GetDeletionTimestamp() != nil {
				return
			}
			if got := cr.Status.AtProvider.Copies; got != tc.want.copies {
				t.Errorf("%s\nstatus.atProvider.copies = %q, want %q", tc.reason, got, tc.want.copies)
			}
			if got := cr.GetCondition(xpv2.TypeReady).Status; got != tc.want.ready {
				t.Errorf("%s\nReady = %s, want %s", tc.reason, got, tc.want.ready)
			}
			var problems []string
			for _, p := range cr.Status.AtProvider.Problems {
				problems = append(problems, p.Reason+" "+p.Namespace+"/"+p.Name)
				if strings.Contains(p.Message, "hunter2") {
					t.Errorf("%s\na problem holds a Secret value: %s", tc.reason, p.Message)
				}
			}
			if diff := cmp.Diff(tc.want.problems, problems); diff != "" {
				t.Errorf("%s\nproblems: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestUpdateCreatesRestoresAndPrunesCopies(t *testing.T) {
	src := cmObj("platform", "settings", map[string]string{"k": "v"}, map[string]string{"share": "yes"})
	rule := copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Names: []string{"settings"}, Namespaces: []string{"team-a", "team-b"}})
	drifted := copyOf(t, rule, src, "team-b").(*corev1.ConfigMap)
	drifted.Data = map[string]string{"k": "edited"}
	stale := copyOf(t, rule, cmObj("platform", "gone", map[string]string{"g": "1"}, nil), "team-a")
	theirs := cmObj("team-a", "settings", map[string]string{"k": "theirs"}, nil)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"host": []byte("db"), "password": []byte("hunter2")}}
	into := copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindSecret, Into: v1alpha1.KindConfigMap, Names: []string{"db"}, Namespaces: []string{"team-a"}, CopyName: "db-endpoint", Keys: &v1alpha1.CopyKeys{Include: []string{"host"}, Rename: map[string]v1alpha1.DataKey{"host": "DB_HOST"}}})

	cases := map[string]struct {
		reason   string
		objs     []client.Object
		cr       *v1alpha1.CopyRule
		want     []string
		events   []string
		copies   string
		problems int
	}{
		"CreateUpdatePrune": {
			reason: "A missing copy is created, a drifted one restored, a stale one pruned; one event says so.",
			objs:   []client.Object{ns("platform"), ns("team-a"), ns("team-b"), src, drifted, stale},
			cr:     rule,
			want: []string{
				"ConfigMap team-a/settings map[k:v]",
				"ConfigMap team-b/settings map[k:v]",
			},
			events: []string{"Normal SyncedCopies: Created 1, updated 1, pruned 1 ConfigMap copies"},
			copies: "2/2",
		},
		"ConflictSkip": {
			reason: "Someone else's object is left alone under Skip and reported; the other copy is made.",
			objs:   []client.Object{ns("platform"), ns("team-a"), ns("team-b"), src, theirs},
			cr:     rule,
			want: []string{
				"ConfigMap team-a/settings map[k:theirs]",
				"ConfigMap team-b/settings map[k:v]",
			},
			events:   []string{"Normal SyncedCopies: Created 1 ConfigMap copies"},
			copies:   "1/2",
			problems: 1,
		},
		"SecretIntoConfigMap": {
			reason: "Only the included key of the Secret goes, renamed, into a ConfigMap of the copy name; no Secret is made.",
			objs:   []client.Object{ns("platform"), ns("team-a"), secret},
			cr:     into,
			want:   []string{"ConfigMap team-a/db-endpoint map[DB_HOST:db]"},
			events: []string{"Normal SyncedCopies: Created 1 ConfigMap copies"},
			copies: "1/1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c, rec := newExternal(t, tc.objs...)
			cr := tc.cr.DeepCopy()
			if _, err := e.Observe(context.Background(), cr); err != nil {
				t.Fatalf("%s\nObserve(...): %v", tc.reason, err)
			}
			if _, err := e.Update(context.Background(), cr); err != nil {
				t.Fatalf("%s\nUpdate(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, contents(t, c)); diff != "" {
				t.Errorf("%s\nUpdate(...): -want, +got objects:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.events, rec.events); diff != "" {
				t.Errorf("%s\nUpdate(...): -want, +got events:\n%s", tc.reason, diff)
			}
			if got := cr.Status.AtProvider.Copies; got != tc.copies {
				t.Errorf("%s\nstatus.atProvider.copies = %q, want %q", tc.reason, got, tc.copies)
			}
			if got := len(cr.Status.AtProvider.Problems); got != tc.problems {
				t.Errorf("%s\n%d problems, want %d: %v", tc.reason, got, tc.problems, cr.Status.AtProvider.Problems)
			}
			// Observing again finds nothing more to write.
			if o, err := e.Observe(context.Background(), cr); err != nil || !o.ResourceUpToDate {
				t.Errorf("%s\nObserve(...) after Update: up to date %t, error %v", tc.reason, o.ResourceUpToDate, err)
			}
		})
	}
}

func TestCreateWritesNothing(t *testing.T) {
	e, c, rec := newExternal(t, ns("platform"))
	got, err := e.Create(context.Background(), copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Names: []string{"a"}, AllNamespaces: true}))
	if err != nil || !cmp.Equal(got, managed.ExternalCreation{}) {
		t.Errorf("Create(...) = %v, %v: want nothing, as Update writes the copies", got, err)
	}
	if len(contents(t, c)) != 0 || len(rec.events) != 0 {
		t.Errorf("Create(...) wrote %v, recorded %v", contents(t, c), rec.events)
	}
}

func TestDeletePrunesCopiesAndReleasesTakenOver(t *testing.T) {
	src := cmObj("platform", "settings", map[string]string{"k": "v"}, nil)
	rule := copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Names: []string{"settings"}, Namespaces: []string{"team-a", "team-b", "kube-system"}})
	taken := copyOf(t, rule, src, "team-b")
	taken.GetAnnotations()[AnnotationTakenOver] = "true"
	into := copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindSecret, Into: v1alpha1.KindConfigMap, Names: []string{"db"}, Namespaces: []string{"team-a"}})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db"}, Data: map[string][]byte{"k": []byte("v")}}

	cases := map[string]struct {
		reason string
		objs   []client.Object
		cr     *v1alpha1.CopyRule
		want   []string
		events []string
	}{
		"PruneAndRelease": {
			reason: "Copies the rule made are deleted, objects it took over released (kept, without its marks), those out of reach left.",
			objs:   []client.Object{ns("platform"), ns("team-a"), ns("team-b"), ns("kube-system"), src, copyOf(t, rule, src, "team-a"), taken, copyOf(t, rule, src, "kube-system")},
			cr:     rule,
			want: []string{
				"ConfigMap kube-system/settings map[k:v]",
				"ConfigMap team-b/settings map[k:v]",
			},
			events: []string{"Normal SyncedCopies: Pruned 1, released 1 ConfigMap copies"},
		},
		"AlreadyGone": {
			reason: "Nothing left to delete is no error and no event.",
			objs:   []client.Object{ns("platform"), ns("team-a"), src},
			cr:     rule,
		},
		"IntoConfigMap": {
			reason: "A rule that copies Secrets into ConfigMaps deletes its ConfigMaps, never the Secret.",
			objs:   []client.Object{ns("platform"), ns("team-a"), secret, copyOf(t, into, secret, "team-a")},
			cr:     into,
			events: []string{"Normal SyncedCopies: Pruned 1 ConfigMap copies"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c, rec := newExternal(t, tc.objs...)
			if _, err := e.Delete(context.Background(), tc.cr.DeepCopy()); err != nil {
				t.Fatalf("%s\nDelete(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, contents(t, c)); diff != "" {
				t.Errorf("%s\nDelete(...): -want, +got objects:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.events, rec.events); diff != "" {
				t.Errorf("%s\nDelete(...): -want, +got events:\n%s", tc.reason, diff)
			}
			// What is released carries none of the rule's marks.
			cm := &corev1.ConfigMap{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-b", Name: "settings"}, cm); err == nil {
				if OwnedBy(owner(tc.cr), FromConfigMap(cm)) || cm.Annotations[AnnotationRule] != "" {
					t.Errorf("%s\nthe released object keeps the rule's marks: %v %v", tc.reason, cm.Labels, cm.Annotations)
				}
			}
		})
	}
}

// TestSelectorWatchJoinedBeforeRead: a rule holds its selector's watch before
// it reads what the selector picks. A watch another rule already runs tells
// only its owners of an object labeled in between.
func TestSelectorWatchJoinedBeforeRead(t *testing.T) {
	cr := copyRule(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"share": "yes"}}, Namespaces: []string{"team-a"}})
	e, c, _ := newExternal(t, ns("platform"), ns("team-a"), cmObj("platform", "settings", map[string]string{"k": "v"}, map[string]string{"share": "yes"}))
	own := types.NamespacedName{Namespace: cr.Namespace, Name: cr.Name}
	s, err := metav1.LabelSelectorAsSelector(cr.Spec.ForProvider.Selector)
	if err != nil {
		t.Fatal(err)
	}
	w := selectorWatch(copyKindOf(cr.Spec.ForProvider), "platform", s)
	reads, joined := 0, 0
	e.cluster.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, cl client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if _, ok := l.(*corev1.ConfigMapList); ok {
				reads++
				if e.watches.Owns(own, e.cluster, w) {
					joined++
				}
			}
			return cl.List(ctx, l, opts...)
		},
	})
	if _, err := e.Observe(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	if reads == 0 || joined != reads {
		t.Errorf("the rule held its selector watch at %d of its %d reads of the sources, want all", joined, reads)
	}
}
