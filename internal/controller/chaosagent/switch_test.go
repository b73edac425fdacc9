package chaosagent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	pcv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
	"github.com/clusterops/provider-clusterops/internal/target"
)

func TestStopReason(t *testing.T) {
	long := strings.Repeat("ü", 100)
	cases := map[string]struct {
		reason      string
		annotations map[string]string
		want        string
		wantStop    bool
	}{
		"None":      {reason: "Without the annotation nothing stops.", annotations: map[string]string{"other": "x"}},
		"Reason":    {reason: "The value is the reason.", annotations: map[string]string{v1alpha1.AnnotationStop: "INC-4711"}, want: "INC-4711", wantStop: true},
		"Empty":     {reason: "An empty value stops too: a hurried operator writes stop=.", annotations: map[string]string{v1alpha1.AnnotationStop: ""}, wantStop: true},
		"False":     {reason: `"false" switches it off, in any case.`, annotations: map[string]string{v1alpha1.AnnotationStop: " False "}},
		"OneLine":   {reason: "Newlines and runs of spaces become single spaces.", annotations: map[string]string{v1alpha1.AnnotationStop: "db\n  down\t now"}, want: "db down now", wantStop: true},
		"Truncated": {reason: "Long values are cut at a rune boundary.", annotations: map[string]string{v1alpha1.AnnotationStop: long}, want: strings.Repeat("ü", maxStopReason/2) + "…", wantStop: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, stop := StopReason(tc.annotations)
			if diff := cmp.Diff([]any{tc.want, tc.wantStop}, []any{got, stop}); diff != "" {
				t.Errorf("\n%s\nStopReason(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func namespace(name string, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func clusterConfig(annotations map[string]string) *pcv1alpha1.ClusterProviderConfig {
	return &pcv1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: annotations}}
}

func withClusterConfig(ca *v1alpha1.ChaosAgent) {
	ca.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: pcv1alpha1.ClusterProviderConfigKind, Name: "default"}
}

func testSchemeWithConfigs(t *testing.T) *fake.ClientBuilder {
	t.Helper()
	s := testScheme(t)
	if err := pcv1alpha1.SchemeBuilder.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s)
}

// TestConfigKillSwitch: an agent whose ClusterProviderConfig carries the
// kill switch runs no round, and its Acting condition says which switch.
func TestConfigKillSwitch(t *testing.T) {
	ctx := context.Background()
	ca := agent(func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.CancerMode = true; withClusterConfig(ca) })
	e, c := newExternal(t, deployment("apps", "web", 2))
	e.kube = testSchemeWithConfigs(t).WithObjects(clusterConfig(map[string]string{v1alpha1.AnnotationStop: "INC-1"})).Build()
	got, err := e.Observe(ctx, ca)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ResourceUpToDate {
		t.Errorf("Observe(...): a stopped agent must be up to date, so no round runs")
	}
	cond := ca.GetCondition(v1alpha1.TypeActing)
	if cond.Status != corev1.ConditionFalse || cond.Reason != v1alpha1.ReasonStoppedByConfig || !strings.Contains(cond.Message, `ClusterProviderConfig "default": INC-1`) {
		t.Errorf("Acting = %+v, want False, StoppedByConfig, naming the config and the reason", cond)
	}
	if next := ca.Status.AtProvider.NextRoundTime; next == nil || !next.After(now) {
		t.Errorf("nextRoundTime = %v, want a time after now: the switch is looked at again, not in a busy loop", next)
	}
	assertReplicas(t, c, "web", 2)
}

// TestNamespaceKillSwitch: namespaces with the kill switch are left out of a
// round; with every target stopped the agent says so.
func TestNamespaceKillSwitch(t *testing.T) {
	ctx := context.Background()
	ca := agent(func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.CancerMode = true })
	e, c := newExternal(t, namespace("apps", map[string]string{v1alpha1.AnnotationStop: "game day over"}), deployment("apps", "web", 2))
	if _, err := e.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	assertReplicas(t, c, "web", 2)
	cond := ca.GetCondition(v1alpha1.TypeActing)
	if cond.Status != corev1.ConditionFalse || cond.Reason != v1alpha1.ReasonStoppedByNamespace {
		t.Errorf("Acting = %+v, want False, StoppedByNamespace", cond)
	}
	if diff := cmp.Diff([]string{"apps"}, ca.Status.AtProvider.StoppedNamespaces); diff != "" {
		t.Errorf("stoppedNamespaces: -want, +got:\n%s", diff)
	}
	if r := ca.GetCondition(xpv2.TypeReady); r.Status != corev1.ConditionTrue {
		t.Errorf("Ready = %+v, want True: a stopped agent is healthy", r)
	}

	// Switched off again, the agent resumes at its next round.
	if err := c.Update(ctx, namespace("apps", map[string]string{v1alpha1.AnnotationStop: "false"})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	assertReplicas(t, c, "web", 4)
	if cond := ca.GetCondition(v1alpha1.TypeActing); cond.Status != corev1.ConditionTrue || len(ca.Status.AtProvider.StoppedNamespaces) != 0 {
		t.Errorf("Acting = %+v, stoppedNamespaces %v, want True and none once the switch is off", cond, ca.Status.AtProvider.StoppedNamespaces)
	}
}

// TestKillSwitchBeforeEveryAction: a switch thrown in the middle of a round
// stops the round's remaining actions, not only the next round.
func TestKillSwitchBeforeEveryAction(t *testing.T) {
	for name, tc := range map[string]struct {
		reason     string
		throw      func(ctx context.Context, c client.Client) error
		wantReason xpv2.ConditionReason
	}{
		"Namespace": {
			reason: "The namespace's switch, thrown after the first scale, spares the second Deployment.",
			throw: func(ctx context.Context, c client.Client) error {
				return c.Update(ctx, namespace("apps", map[string]string{v1alpha1.AnnotationStop: "now"}))
			},
			wantReason: v1alpha1.ReasonStoppedByNamespace,
		},
		"Config": {
			reason: "The config's switch, thrown after the first scale, spares the second Deployment and stops the agent.",
			throw: func(ctx context.Context, c client.Client) error {
				cpc := clusterConfig(nil)
				if err := c.Get(ctx, client.ObjectKeyFromObject(cpc), cpc); err != nil {
					return err
				}
				cpc.SetAnnotations(map[string]string{v1alpha1.AnnotationStop: "now"})
				return c.Update(ctx, cpc)
			},
			wantReason: v1alpha1.ReasonStoppedByConfig,
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ca := agent(func(ca *v1alpha1.ChaosAgent) {
				ca.Spec.ForProvider.CancerMode, ca.Spec.ForProvider.MaxActionsPerRound = true, 2
				withClusterConfig(ca)
			})
			// One client holds the cluster and the control plane, so the
			// interceptor can throw a switch the next read sees.
			var c client.Client
			thrown := false
			c = testSchemeWithConfigs(t).
				WithObjects(namespace("apps", nil), clusterConfig(nil), deployment("apps", "a", 1), deployment("apps", "b", 1)).
				WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, cl client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
					if err := cl.Update(ctx, o, opts...); err != nil {
						return err
					}
					if _, ok := o.(*corev1.Namespace); ok || thrown {
						return nil
					}
					if _, ok := o.(*pcv1alpha1.ClusterProviderConfig); ok {
						return nil
					}
					if o.GetName() == "a" || o.GetName() == "b" {
						thrown = true
						return tc.throw(ctx, c)
					}
					return nil
				}}).Build()
			e := &external{
				cluster: &target.Cluster{Client: c, Local: true, Reach: reach.Policy{Config: "test", OwnNamespace: true, ProviderNamespace: "crossplane-system", Denied: reach.DefaultDenied}},
				kube:    c, status: &begun{}, record: event.NewNopRecorder(), now: func() time.Time { return now },
			}
			if _, err := e.Update(ctx, ca); err != nil {
				t.Fatal(err)
			}
			if n := ca.Status.AtProvider.DeploymentsScaled; n != 1 {
				t.Errorf("\n%s\ndeploymentsScaled = %d, want 1", tc.reason, n)
			}
			if s := ca.Status.AtProvider.LastRoundSummary; !strings.Contains(s, "left alone: stopped by the "+v1alpha1.AnnotationStop) {
				t.Errorf("\n%s\nlastRoundSummary = %q, want it to say the second Deployment was left alone", tc.reason, s)
			}
			if got := ca.GetCondition(v1alpha1.TypeActing).Reason; got != tc.wantReason {
				t.Errorf("\n%s\nActing reason = %q, want %q", tc.reason, got, tc.wantReason)
			}
		})
	}
}

func assertReplicas(t *testing.T, c client.Client, name string, want int32) {
	t.Helper()
	d := deployment("apps", name, 0)
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "apps", Name: name}, d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != want {
		t.Errorf("replicas of %s = %d, want %d", name, *d.Spec.Replicas, want)
	}
}

// TestNoNamespaceIsNoStop: an agent with no namespace in reach is not
// reported as stopped by a kill switch; Ready says what is wrong.
func TestNoNamespaceIsNoStop(t *testing.T) {
	ca := agent(func(ca *v1alpha1.ChaosAgent) {
		ca.Spec.ForProvider.CancerMode = true
		ca.Spec.ForProvider.Namespaces = []string{"elsewhere"}
	})
	e, _ := newExternal(t)
	if _, err := e.Update(context.Background(), ca); err != nil {
		t.Fatal(err)
	}
	if c := ca.GetCondition(v1alpha1.TypeActing); c.Reason == v1alpha1.ReasonStoppedByNamespace || c.Reason == v1alpha1.ReasonStoppedByConfig {
		t.Errorf("Acting = %+v, want no kill switch named", c)
	}
	if r := ca.GetCondition(xpv2.TypeReady); r.Status != corev1.ConditionFalse || !strings.Contains(r.Message, "no namespace to act in") {
		t.Errorf("Ready = %+v, want False saying there is no namespace to act in", r)
	}
}
