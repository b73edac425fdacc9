package chaosagent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
	"github.com/clusterops/provider-clusterops/internal/target"
)

func agent(mod func(*v1alpha1.ChaosAgent)) *v1alpha1.ChaosAgent {
	ca := &v1alpha1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Name: "edmund", Namespace: "apps", UID: "agent-uid"},
		Spec: v1alpha1.ChaosAgentSpec{ForProvider: v1alpha1.ChaosAgentParameters{
			Eagerness: 100, Seed: ptr.To[int64](1), Interval: metav1.Duration{Duration: time.Minute},
		}},
	}
	mod(ca)
	return ca
}

func testScheme(t *testing.T) *runtime.Scheme {
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

func newExternal(t *testing.T, objs ...client.Object) (*external, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	cl := &target.Cluster{Client: c, Local: true, Reach: reach.Policy{Config: "test", ProviderNamespace: "crossplane-system", Denied: reach.DefaultDenied}}
	evict := func(ctx context.Context, p *corev1.Pod) error {
		return c.SubResource("eviction").Create(ctx, p, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
	}
	return &external{cluster: cl, kube: c, record: event.NewNopRecorder(), now: func() time.Time { return now }, evict: evict}, c
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
}

func TestObserve(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	cases := map[string]struct {
		reason      string
		agent       *v1alpha1.ChaosAgent
		objs        []client.Object
		want        managed.ExternalObservation
		wantNext    *metav1.Time
		wantSummary string
		wantReady   corev1.ConditionStatus
	}{
		"FirstRoundDue": {
			reason:    "An agent that never ran is due at once, and not Ready yet.",
			agent:     agent(func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.TantrumMode = true }),
			want:      managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false},
			wantNext:  at(0),
			wantReady: corev1.ConditionFalse,
		},
		"NotDueYet": {
			reason: "Within the interval since the last round, the agent is up to date.",
			agent: agent(func(ca *v1alpha1.ChaosAgent) {
				ca.Spec.ForProvider.TantrumMode = true
				ca.Status.AtProvider.LastRoundTime = at(-30 * time.Second)
				ca.SetConditions(xpv2.Available())
			}),
			want:      managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
			wantNext:  at(30 * time.Second),
			wantReady: corev1.ConditionTrue,
		},
		"QuietWindow": {
			reason: "In a quiet window the agent is up to date until the window ends, and says so.",
			agent: agent(func(ca *v1alpha1.ChaosAgent) {
				ca.Spec.ForProvider.TantrumMode = true
				ca.Spec.ForProvider.QuietWindows = []v1alpha1.QuietWindow{{Start: "11:00", End: "13:00"}}
			}),
			want:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
			wantNext:    at(time.Hour),
			wantSummary: "nothing happened: quiet window until 2026-03-02T13:00:00Z",
			wantReady:   corev1.ConditionFalse,
		},
		"DeletedWithBackup": {
			reason: "A deleted agent exists while its backup does.",
			agent:  agent(func(ca *v1alpha1.ChaosAgent) { ca.DeletionTimestamp = at(0); ca.Finalizers = []string{"x"} }),
			objs:   []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "edmund-chaos-backup", Labels: map[string]string{LabelBackupOf: "edmund"}}}},
			want:   managed.ExternalObservation{ResourceExists: true},
		},
		"DeletedWithoutBackup": {
			reason: "A deleted agent without a backup is gone.",
			agent:  agent(func(ca *v1alpha1.ChaosAgent) { ca.DeletionTimestamp = at(0); ca.Finalizers = []string{"x"} }),
			want:   managed.ExternalObservation{ResourceExists: false},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, _ := newExternal(t, tc.objs...)
			got, err := e.Observe(context.Background(), tc.agent)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			o := tc.agent.Status.AtProvider
			if diff := cmp.Diff(tc.wantNext, o.NextRoundTime); diff != "" {
				t.Errorf("\n%s\nnextRoundTime: -want, +got:\n%s", tc.reason, diff)
			}
			if o.LastRoundSummary != tc.wantSummary {
				t.Errorf("\n%s\nlastRoundSummary = %q, want %q", tc.reason, o.LastRoundSummary, tc.wantSummary)
			}
			if tc.wantReady != "" && tc.agent.GetCondition(xpv2.TypeReady).Status != tc.wantReady {
				t.Errorf("\n%s\nReady = %s, want %s", tc.reason, tc.agent.GetCondition(xpv2.TypeReady).Status, tc.wantReady)
			}
		})
	}
}

// TestObserveOnlyRecordsADryRun: under an Observe-only policy the due round is
// recorded as a dry run in Observe, and nothing changes.
func TestObserveOnlyRecordsADryRun(t *testing.T) {
	ca := agent(func(ca *v1alpha1.ChaosAgent) {
		ca.Spec.ForProvider.CancerMode = true
		ca.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
	})
	e, c := newExternal(t, deployment("apps", "web", 2))
	got, err := e.Observe(context.Background(), ca)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ResourceUpToDate {
		t.Errorf("Observe(...): want up to date under an Observe-only policy")
	}
	want := []v1alpha1.ChaosAction{{Time: metav1.NewTime(now), Action: v1alpha1.ActionScaleDeployment, Namespace: "apps", Name: "web", Before: "2", After: "4", DryRun: true}}
	if diff := cmp.Diff(want, ca.Status.AtProvider.RecentActions); diff != "" {
		t.Errorf("recentActions: -want, +got:\n%s", diff)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "apps", Name: "web"}, d); err != nil || *d.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas = %d (%v), want 2 unchanged", ptr.Deref(d.Spec.Replicas, 0), err)
	}
	if ca.Status.AtProvider.DeploymentsScaled != 0 {
		t.Errorf("deploymentsScaled = %d, want 0: dry runs are not counted", ca.Status.AtProvider.DeploymentsScaled)
	}
}

// TestUpdateAndDelete runs a round that scales a Deployment and rewrites a
// ConfigMap, then deletes the agent: both come back byte for byte and the
// backup goes.
func TestUpdateAndDelete(t *testing.T) {
	ctx := context.Background()
	original := map[string]string{"app.yaml": "port: 80\n", "bytes": "tabs\tand\r\nCRLF, ünïcödé, trailing space "}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "settings"}, Data: original}
	ca := agent(func(ca *v1alpha1.ChaosAgent) {
		ca.Spec.ForProvider.CancerMode, ca.Spec.ForProvider.IpsumMode = true, true
		ca.Spec.ForProvider.MaxActionsPerRound = 2
		ca.Spec.ForProvider.MaxReplicas = 3
	})
	e, c := newExternal(t, deployment("apps", "web", 2), cm)
	if _, err := e.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	o := ca.Status.AtProvider
	if o.RoundsRun != 1 || o.DeploymentsScaled != 1 || o.ConfigMapsRewritten != 1 || len(o.RecentActions) != 2 {
		t.Fatalf("status after one round = %+v, want one scale and one rewrite", o)
	}
	if c := ca.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionTrue {
		t.Errorf("Ready = %+v, want True after a round", c)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "web"}, d); err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("replicas = %d (%v), want 3: doubled, capped at maxReplicas", ptr.Deref(d.Spec.Replicas, 0), err)
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "settings"}, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(IpsumData(1, "apps", "settings", []string{"app.yaml", "bytes"}), got.Data); diff != "" {
		t.Errorf("rewritten data: -want, +got:\n%s", diff)
	}
	for _, a := range o.RecentActions {
		if strings.Contains(a.Before+a.After, "port") {
			t.Errorf("status reveals ConfigMap data: %+v", a)
		}
	}

	ca.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	if _, err := e.Delete(ctx, ca); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "web"}, d); err != nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas after revert = %d (%v), want 2", ptr.Deref(d.Spec.Replicas, 0), err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "settings"}, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(original, got.Data); diff != "" {
		t.Errorf("data after revert: -want, +got:\n%s", diff)
	}
	err := c.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "edmund-chaos-backup"}, &corev1.ConfigMap{})
	if !kerrors.IsNotFound(err) {
		t.Errorf("backup after delete: want NotFound, got %v", err)
	}
}

// TestSecondChangeKeepsFirstOriginal: a Deployment scaled twice is restored to
// its replicas before the first scale.
func TestSecondChangeKeepsFirstOriginal(t *testing.T) {
	ctx := context.Background()
	ca := agent(func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.CancerMode = true })
	e, c := newExternal(t, deployment("apps", "web", 1))
	for range 2 {
		if _, err := e.Update(ctx, ca); err != nil {
			t.Fatal(err)
		}
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "web"}, d); err != nil || *d.Spec.Replicas != 4 {
		t.Fatalf("replicas = %d (%v), want 4 after two rounds", ptr.Deref(d.Spec.Replicas, 0), err)
	}
	if _, err := e.Delete(ctx, ca); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "web"}, d); err != nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas after revert = %d (%v), want the first original 1", ptr.Deref(d.Spec.Replicas, 0), err)
	}
}

func TestMayActIn(t *testing.T) {
	grantAll := func(string, string) error { return nil }
	pc := reach.Policy{Config: `ProviderConfig "p"`, ProviderNamespace: "crossplane-system"}
	cpc := reach.Policy{Config: `ClusterProviderConfig "c"`, ProviderNamespace: "crossplane-system", Namespaces: []string{"kube-system", "team-*"}}
	cases := map[string]struct {
		reason string
		check  checkFn
		own    string
		ns     string
		ok     bool
	}{
		"Own":                    {reason: "An agent acts in its own namespace.", check: checkOf(pc), own: "apps", ns: "apps", ok: true},
		"OtherWithoutGrant":      {reason: "A namespaced ProviderConfig grants nothing else.", check: checkOf(pc), own: "apps", ns: "team-a"},
		"Granted":                {reason: "A ClusterProviderConfig's reach is honoured.", check: checkOf(cpc), own: "apps", ns: "team-a", ok: true},
		"ProviderNamespace":      {reason: "The provider's namespace never, whatever grants it.", check: grantAll, own: "crossplane-system", ns: "crossplane-system"},
		"SystemAsOwn":            {reason: "Living in kube-system is no grant to act there.", check: checkOf(pc), own: "kube-system", ns: "kube-system"},
		"SystemGrantedExplictly": {reason: "A ClusterProviderConfig that names kube-system lets the agent act there.", check: checkOf(cpc), own: "apps", ns: "kube-system", ok: true},
		"SystemDeniedByDefault": {
			reason: "A ClusterProviderConfig with the default denials keeps kube-public out.",
			check:  checkOf(reach.Policy{Config: "c", Namespaces: []string{"*"}, Denied: reach.DefaultDenied}), own: "apps", ns: "kube-public",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := mayActIn(tc.check, "crossplane-system", tc.own, tc.ns)
			if (err == nil) != tc.ok {
				t.Errorf("\n%s\nmayActIn(%q, %q) = %v, want allowed %t", tc.reason, tc.own, tc.ns, err, tc.ok)
			}
		})
	}
}

func checkOf(p reach.Policy) checkFn {
	return func(own, ns string) error { return p.Check(own, ns, nil) }
}

func TestBackupKeysAndData(t *testing.T) {
	kind, ns, name, ok := parseBackupKey(backupKey(kindConfigMap, "apps", "my.dotted.config"))
	if diff := cmp.Diff([]any{kindConfigMap, "apps", "my.dotted.config", true}, []any{kind, ns, name, ok}); diff != "" {
		t.Errorf("parseBackupKey(backupKey(...)): -want, +got:\n%s", diff)
	}
	data := map[string]string{"a": "\x00\xff binary", "b": ""}
	got, err := decodeData(encodeData(data))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(data, got); diff != "" {
		t.Errorf("decodeData(encodeData(...)): -want, +got:\n%s", diff)
	}
}

func TestIpsumIsDeterministicPerRound(t *testing.T) {
	a, b := Ipsum(3, "apps", "cfg", "k"), Ipsum(3, "apps", "cfg", "k")
	if a != b {
		t.Errorf("Ipsum differs between calls: %q, %q", a, b)
	}
	if a == Ipsum(4, "apps", "cfg", "k") {
		t.Errorf("Ipsum is the same in rounds 3 and 4: %q", a)
	}
	if d := Digest(map[string]string{"password": "hunter2"}); strings.Contains(d, "hunter2") || strings.Contains(d, "password") {
		t.Errorf("Digest reveals the data: %q", d)
	}
}
