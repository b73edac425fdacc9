package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// chaosAgent is an agent that acts every second, every time, repeatably.
func chaosAgent(ns, name string, mod func(p *chaosv1alpha1.ChaosAgentParameters)) *chaosv1alpha1.ChaosAgent {
	ca := &chaosv1alpha1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
			Eagerness: 100, Interval: metav1.Duration{Duration: time.Second}, Seed: ptr.To[int64](1605),
		}},
	}
	mod(&ca.Spec.ForProvider)
	return ca
}

// runningPod creates a pod and reports it Running and Ready, as a kubelet
// would: the Eviction API only consults disruption budgets for such pods.
func runningPod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	env.Create(t, p)
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// rounds waits until the agent has run at least n rounds, and returns it.
func rounds(t *testing.T, ca *chaosv1alpha1.ChaosAgent, n int64) *chaosv1alpha1.ChaosAgent {
	t.Helper()
	testenv.Eventually(t, wait, "the agent to run its rounds", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		return ca.Status.AtProvider.RoundsRun >= n, err
	})
	return ca
}

func exists(t *testing.T, o client.Object) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
	if err != nil && !kerrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// deleteAgent deletes an agent and waits until it is gone.
func deleteAgent(t *testing.T, ca *chaosv1alpha1.ChaosAgent) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), ca); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the agent to be deleted", func(context.Context) (bool, error) {
		return !exists(t, &chaosv1alpha1.ChaosAgent{ObjectMeta: ca.ObjectMeta}), nil
	})
}

func TestChaosAgentBelowToleranceKillsNothing(t *testing.T) {
	ns := env.Namespace(t, "chaos-tolerance", nil)
	var pods []*corev1.Pod
	for _, n := range []string{"a", "b", "c"} {
		pods = append(pods, runningPod(t, ns, n, nil))
	}
	ca := chaosAgent(ns, "edmund", func(p *chaosv1alpha1.ChaosAgentParameters) { p.TantrumMode, p.PodTolerance = true, 4 })
	env.Create(t, ca)
	rounds(t, ca, 3)
	if s := ca.Status.AtProvider.LastRoundSummary; !strings.Contains(s, "3 candidate pods, below podTolerance 4") {
		t.Errorf("lastRoundSummary = %q, want it to say the pods are below tolerance", s)
	}
	if c := ca.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionTrue {
		t.Errorf("Ready = %+v, want True once a round ran", c)
	}
	for _, p := range pods {
		uid := p.UID
		if !exists(t, p) || p.UID != uid {
			t.Errorf("pod %s was killed below tolerance", p.Name)
		}
	}
}

func TestChaosAgentKillsOnlyInTargets(t *testing.T) {
	own := env.Namespace(t, "chaos-targets", nil)
	team := env.Namespace(t, "team-chaos", nil)       // reachable: the default config grants team-*
	unreachable := env.Namespace(t, "elsewhere", nil) // named, but out of reach
	untargeted := env.Namespace(t, "team-bystander", nil)
	victims := []*corev1.Pod{runningPod(t, own, "v1", nil), runningPod(t, own, "v2", nil), runningPod(t, team, "v3", nil)}
	spared := []*corev1.Pod{
		runningPod(t, own, "immortal", map[string]string{"workload.clusterops.io/immortalcontainer": "x"}),
		runningPod(t, unreachable, "far", nil),
		runningPod(t, untargeted, "bystander", nil),
	}
	ca := chaosAgent(own, "tantrum", func(p *chaosv1alpha1.ChaosAgentParameters) {
		p.TantrumMode, p.RespectDisruptionBudgets, p.MaxActionsPerRound = true, ptr.To(false), 10
		p.Namespaces = []string{own, team, unreachable}
	})
	env.Create(t, ca)
	testenv.Eventually(t, wait, "the pods in the target namespaces to be killed", func(context.Context) (bool, error) {
		for _, p := range victims {
			if exists(t, p.DeepCopy()) {
				return false, nil
			}
		}
		return true, nil
	})
	rounds(t, ca, ca.Status.AtProvider.RoundsRun+2)
	for _, p := range spared {
		if !exists(t, p) {
			t.Errorf("pod %s/%s was killed outside the agent's targets", p.Namespace, p.Name)
		}
	}
	o := ca.Status.AtProvider
	if o.PodsKilled != 3 {
		t.Errorf("podsKilled = %d, want 3", o.PodsKilled)
	}
	if diff := strings.Join(o.TargetNamespaces, ","); strings.Contains(diff, unreachable) || !strings.Contains(diff, team) {
		t.Errorf("targetNamespaces = %v, want %s and %s but not %s", o.TargetNamespaces, own, team, unreachable)
	}
	if !strings.Contains(o.LastRoundSummary, `namespace "`+unreachable+`" is out of reach`) {
		t.Errorf("lastRoundSummary = %q, want it to say %s is out of reach", o.LastRoundSummary, unreachable)
	}
}

func TestChaosAgentEvictionRefusedByPDB(t *testing.T) {
	ns := env.Namespace(t, "chaos-pdb", nil)
	guarded := runningPod(t, ns, "guarded", map[string]string{"app": "guarded"})
	// No disruption controller runs on envtest: the budget never allows a disruption.
	env.Create(t, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guard", Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	})
	free := runningPod(t, ns, "free", nil)
	ca := chaosAgent(ns, "polite", func(p *chaosv1alpha1.ChaosAgentParameters) { p.TantrumMode, p.MaxActionsPerRound = true, 2 })
	env.Create(t, ca)
	testenv.Eventually(t, wait, "a refused eviction to be reported", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca); err != nil {
			return false, err
		}
		o := ca.Status.AtProvider
		if o.Refused >= 1 && o.PodsKilled == 1 && strings.Contains(o.LastRoundSummary, "PDB refused") {
			return true, nil
		}
		return false, fmt.Errorf("refused %d, summary %q, synced %q", o.Refused, o.LastRoundSummary, ca.GetCondition(xpv2.TypeSynced).Message)
	})
	uid := guarded.UID
	if !exists(t, guarded) || guarded.UID != uid {
		t.Errorf("the pod a PodDisruptionBudget protects was killed")
	}
	if exists(t, free) {
		t.Errorf("the pod no budget protects was not evicted")
	}
	last := ca.Status.AtProvider.RecentActions[len(ca.Status.AtProvider.RecentActions)-1]
	if last.Action != chaosv1alpha1.ActionEvictionRefused || last.Name != "guarded" {
		t.Errorf("last recent action = %+v, want EvictionRefused of guarded", last)
	}
	events := &corev1.EventList{}
	testenv.Eventually(t, wait, "an EvictionRefused event on the agent", func(ctx context.Context) (bool, error) {
		err := env.Client.List(ctx, events, client.InNamespace(ns))
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "polite" && e.Reason == chaosv1alpha1.ActionEvictionRefused {
				return true, err
			}
		}
		return false, err
	})
}

func TestChaosAgentDoublesUpToMaxReplicasAndReverts(t *testing.T) {
	ns := env.Namespace(t, "chaos-cancer", nil)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
	env.Create(t, d)
	ca := chaosAgent(ns, "cancer", func(p *chaosv1alpha1.ChaosAgentParameters) { p.CancerMode, p.MaxReplicas = true, 10 })
	env.Create(t, ca)
	testenv.Eventually(t, wait, "the Deployment to reach maxReplicas", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d)
		return *d.Spec.Replicas == 10, err
	})
	rounds(t, ca, ca.Status.AtProvider.RoundsRun+2)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil || *d.Spec.Replicas != 10 {
		t.Fatalf("replicas = %d (%v), want 10: never beyond maxReplicas", *d.Spec.Replicas, err)
	}
	if n := ca.Status.AtProvider.DeploymentsScaled; n != 2 {
		t.Errorf("deploymentsScaled = %d, want 2 (3 -> 6 -> 10)", n)
	}
	backup := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cancer-chaos-backup"}}
	if !exists(t, backup) || len(backup.OwnerReferences) != 1 || backup.OwnerReferences[0].Name != "cancer" {
		t.Errorf("backup ConfigMap = %+v, want one owned by the agent", backup.ObjectMeta)
	}

	deleteAgent(t, ca)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas after the agent was deleted = %d (%v), want the original 3", *d.Spec.Replicas, err)
	}
	if exists(t, backup) {
		t.Errorf("the backup ConfigMap outlived the agent")
	}
}

func TestChaosAgentIpsumSkipsProtectedAndReverts(t *testing.T) {
	ns := env.Namespace(t, "chaos-ipsum", nil)
	original := map[string]string{"app.yaml": "port: 80\nname: web\n", "motd": "  ünïcödé, tabs\tand CRLF\r\n  "}
	victim := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: ns}, Data: original}
	protected := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "frozen", Namespace: ns}, Data: map[string]string{"k": "v"}, Immutable: ptr.To(true)},
		{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: ns}, Data: map[string]string{"ca.crt": "cert"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "rollout", Namespace: ns, Labels: map[string]string{"workload.clusterops.io/appbundle": "b"}}, Data: map[string]string{"k": "v"}},
	}
	env.Create(t, victim)
	for _, c := range protected {
		env.Create(t, c)
	}
	ca := chaosAgent(ns, "ipsum", func(p *chaosv1alpha1.ChaosAgentParameters) { p.IpsumMode, p.MaxActionsPerRound = true, 10 })
	env.Create(t, ca)
	testenv.Eventually(t, wait, "the ConfigMap to be rewritten", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(victim), victim)
		return victim.Data["app.yaml"] != original["app.yaml"], err
	})
	rounds(t, ca, ca.Status.AtProvider.RoundsRun+2)
	for _, c := range protected {
		rv := c.ResourceVersion
		if !exists(t, c) || c.ResourceVersion != rv {
			t.Errorf("protected ConfigMap %s was written", c.Name)
		}
	}
	for _, a := range ca.Status.AtProvider.RecentActions {
		if strings.Contains(a.Before+a.After, "port") {
			t.Errorf("status reveals ConfigMap data: %+v", a)
		}
	}

	deleteAgent(t, ca)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(victim), victim); err != nil {
		t.Fatal(err)
	}
	for k, v := range original {
		if victim.Data[k] != v || len(victim.Data) != len(original) {
			t.Errorf("data after revert = %q, want %q byte for byte", victim.Data, original)
			break
		}
	}
	if exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ipsum-chaos-backup"}}) {
		t.Errorf("the backup ConfigMap outlived the agent")
	}
}

// snapshot records the resource versions of every pod, Deployment and
// ConfigMap in a namespace: equal snapshots mean nothing was written.
func snapshot(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	pods, deploys, cms := &corev1.PodList{}, &appsv1.DeploymentList{}, &corev1.ConfigMapList{}
	for _, l := range []client.ObjectList{pods, deploys, cms} {
		if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods.Items {
		out["pod/"+p.Name] = p.ResourceVersion
	}
	for _, d := range deploys.Items {
		out["deployment/"+d.Name] = d.ResourceVersion
	}
	for _, c := range cms.Items {
		out["configmap/"+c.Name] = c.ResourceVersion
	}
	return out
}

// victims fills a namespace with one of each kind of candidate.
func victims(t *testing.T, ns string) {
	t.Helper()
	runningPod(t, ns, "pod", nil)
	env.Create(t,
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
				},
			},
		},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"k": "v"}},
	)
}

func allModes(p *chaosv1alpha1.ChaosAgentParameters) {
	p.TantrumMode, p.CancerMode, p.IpsumMode, p.MaxActionsPerRound = true, true, true, 3
}

func TestChaosAgentDryRunWritesNothing(t *testing.T) {
	ns := env.Namespace(t, "chaos-dryrun", nil)
	victims(t, ns)
	before := snapshot(t, ns)
	ca := chaosAgent(ns, "dry", func(p *chaosv1alpha1.ChaosAgentParameters) { allModes(p); p.DryRun = true })
	env.Create(t, ca)
	rounds(t, ca, 3)
	if diff := cmpMaps(before, snapshot(t, ns)); diff != "" {
		t.Errorf("a dry run wrote to the cluster: %s", diff)
	}
	o := ca.Status.AtProvider
	if len(o.RecentActions) < 3 {
		t.Fatalf("recentActions = %+v, want the would-be actions", o.RecentActions)
	}
	for _, a := range o.RecentActions {
		if !a.DryRun {
			t.Errorf("recent action %+v is not marked as a dry run", a)
		}
	}
	if o.PodsKilled+o.DeploymentsScaled+o.ConfigMapsRewritten != 0 {
		t.Errorf("counters = %+v, want zero for a dry run", o)
	}
	if !strings.Contains(o.LastRoundSummary, "(dry run)") {
		t.Errorf("lastRoundSummary = %q, want it to say what would have happened", o.LastRoundSummary)
	}
	planIsLastRound(t, ca)
}

// planIsLastRound checks that a dry-running agent's plan lists what its last
// round would have done, as its recent actions record it.
func planIsLastRound(t *testing.T, ca *chaosv1alpha1.ChaosAgent) {
	t.Helper()
	o := ca.Status.AtProvider
	if o.Plan == nil {
		t.Fatalf("a dry-running agent has no plan; last round: %s", o.LastRoundSummary)
	}
	var last []string
	for _, a := range o.RecentActions {
		if o.LastRoundTime != nil && a.Time.Equal(o.LastRoundTime) {
			last = append(last, a.Namespace+"/"+a.Name)
		}
	}
	var planned []string
	for _, a := range o.Plan.Actions {
		planned = append(planned, a.Namespace+"/"+a.Name)
	}
	slices.Sort(last)
	slices.Sort(planned)
	if !slices.Equal(last, planned) || o.Plan.Summary == "" {
		t.Errorf("plan %q (%s), want the last round's actions %q", planned, o.Plan.Summary, last)
	}
}

func TestChaosAgentObserveOnlyWritesNothing(t *testing.T) {
	ns := env.Namespace(t, "chaos-observe", nil)
	victims(t, ns)
	before := snapshot(t, ns)
	ca := chaosAgent(ns, "observer", allModes)
	ca.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
	env.Create(t, ca)
	rounds(t, ca, 2)
	if diff := cmpMaps(before, snapshot(t, ns)); diff != "" {
		t.Errorf("an Observe-only agent wrote to the cluster: %s", diff)
	}
	for _, a := range ca.Status.AtProvider.RecentActions {
		if !a.DryRun {
			t.Errorf("recent action %+v is not marked as a dry run", a)
		}
	}
	planIsLastRound(t, ca)
}

func TestChaosAgentQuietWindowWritesNothing(t *testing.T) {
	ns := env.Namespace(t, "chaos-quiet", nil)
	victims(t, ns)
	before := snapshot(t, ns)
	// A window whose end equals its start lasts all day, every day.
	ca := chaosAgent(ns, "quiet", func(p *chaosv1alpha1.ChaosAgentParameters) {
		allModes(p)
		p.QuietWindows = []chaosv1alpha1.QuietWindow{{Start: "00:00", End: "00:00", TimeZone: "Europe/Berlin"}}
	})
	env.Create(t, ca)
	testenv.Eventually(t, wait, "the agent to report its quiet window", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		return strings.Contains(ca.Status.AtProvider.LastRoundSummary, "quiet window until"), err
	})
	// A dry-running companion with the same interval shows three rounds' time passing.
	companion := chaosAgent(ns, "clock", func(p *chaosv1alpha1.ChaosAgentParameters) { p.IpsumMode, p.DryRun = true, true })
	env.Create(t, companion)
	rounds(t, companion, 3)
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "quiet"}, ca); err != nil {
		t.Fatal(err)
	}
	if n := ca.Status.AtProvider.RoundsRun; n != 0 {
		t.Errorf("roundsRun = %d in a quiet window, want 0", n)
	}
	if diff := cmpMaps(before, snapshot(t, ns)); diff != "" {
		t.Errorf("an agent in a quiet window wrote to the cluster: %s", diff)
	}
	if c := ca.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "quiet window") {
		t.Errorf("Ready = %+v, want False explaining the quiet window", c)
	}
}

// cmpMaps describes how two snapshots differ.
func cmpMaps(a, b map[string]string) string {
	var diffs []string
	for k, v := range a {
		if b[k] != v {
			diffs = append(diffs, k+" changed")
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, k+" appeared")
		}
	}
	return strings.Join(diffs, ", ")
}
