package chaosagent

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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
	pcv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/ownership"
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
	if err := pcv1alpha1.SchemeBuilder.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func newExternal(t *testing.T, objs ...client.Object) (*external, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	cl := &target.Cluster{Client: c, Local: true, Reach: reach.Policy{Config: "test", OwnNamespace: true, ProviderNamespace: "crossplane-system", Denied: reach.DefaultDenied}}
	evict := func(ctx context.Context, p *corev1.Pod) error {
		return c.SubResource("eviction").Create(ctx, p, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
	}
	return &external{cluster: cl, kube: c, status: &begun{}, record: event.NewNopRecorder(), now: func() time.Time { return now }, evict: evict}, c
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
}

// recorder keeps the events an external client records.
type recorder struct{ got []event.Event }

func (r *recorder) Event(_ runtime.Object, e event.Event)    { r.got = append(r.got, e) }
func (r *recorder) WithAnnotations(...string) event.Recorder { return r }

// A cluster is what a test reads back from the fake cluster: every
// Deployment's replicas and every ConfigMap's labels and data, by
// namespace/name, so a test asserts what a call changed and what it left.
type cluster struct {
	Replicas   map[string]int32
	ConfigMaps map[string]configMap
}

type configMap struct {
	Labels, Data map[string]string
}

func read(t *testing.T, c client.Client) cluster {
	t.Helper()
	out := cluster{Replicas: map[string]int32{}, ConfigMaps: map[string]configMap{}}
	ds := &appsv1.DeploymentList{}
	cms := &corev1.ConfigMapList{}
	if err := c.List(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), cms); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Items {
		out.Replicas[d.Namespace+"/"+d.Name] = ptr.Deref(d.Spec.Replicas, 1)
	}
	for _, cm := range cms.Items {
		out.ConfigMaps[cm.Namespace+"/"+cm.Name] = configMap{Labels: cm.Labels, Data: cm.Data}
	}
	return out
}

// with is c with changes: a replica count, a ConfigMap, or a ConfigMap gone
// (a nil *configMap).
func (c cluster) with(changes map[string]any) cluster {
	out := cluster{Replicas: maps.Clone(c.Replicas), ConfigMaps: maps.Clone(c.ConfigMaps)}
	for k, v := range changes {
		switch v := v.(type) {
		case int32:
			out.Replicas[k] = v
		case configMap:
			out.ConfigMaps[k] = v
		case *configMap:
			delete(out.ConfigMaps, k)
		}
	}
	return out
}

// The objects the tests' agent, apps/edmund, finds and makes.
var (
	original = map[string]string{"app.yaml": "port: 80\n", "bytes": "tabs\tand\r\nCRLF, ünïcödé, trailing space "}
	// backupLabels are the labels of edmund's backup.
	backupLabels = map[string]string{LabelBackupOf: "edmund", ownership.LabelManagedBy: ownership.ManagedBy}
)

const backupOfEdmund = "apps/edmund-chaos-backup"

func settings(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "settings"}, Data: data}
}

// backupNamed is a ConfigMap where edmund keeps its backup, with any labels:
// edmund's own, another agent's, or none.
func backupNamed(labels, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "edmund-chaos-backup", Labels: labels}, Data: data}
}

func deleted(ca *v1alpha1.ChaosAgent) {
	ca.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	ca.Finalizers = []string{"finalizer.managedresource.crossplane.io"}
}

func TestObserveSaysWhenARoundIsDue(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	cases := map[string]struct {
		reason      string
		agent       *v1alpha1.ChaosAgent
		objs        []client.Object
		want        managed.ExternalObservation
		wantErr     string
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
		"StoppedByConfig": {
			reason: "The config's kill switch keeps a due round from running, until the next round would be due.",
			agent: agent(func(ca *v1alpha1.ChaosAgent) {
				ca.Spec.ForProvider.TantrumMode = true
				ca.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: pcv1alpha1.ClusterProviderConfigKind, Name: "default"}
			}),
			objs:        []client.Object{&pcv1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: map[string]string{v1alpha1.AnnotationStop: "INC-4711"}}}},
			want:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
			wantNext:    at(time.Minute),
			wantSummary: `nothing happened: stopped by the chaos.clusterops.io/stop annotation on ClusterProviderConfig "default": INC-4711`,
			wantReady:   corev1.ConditionFalse,
		},
		"InvalidSpec": {
			reason:    "An agent with no mode is reported, not observed.",
			agent:     agent(func(*v1alpha1.ChaosAgent) {}),
			wantErr:   "enable at least one of",
			wantReady: corev1.ConditionFalse,
		},
		"DeletedWithBackup": {
			reason: "A deleted agent exists while its backup does.",
			agent:  agent(deleted),
			objs:   []client.Object{backupNamed(backupLabels, nil)},
			want:   managed.ExternalObservation{ResourceExists: true},
		},
		"DeletedWithoutBackup": {
			reason: "A deleted agent without a backup is gone.",
			agent:  agent(deleted),
			want:   managed.ExternalObservation{ResourceExists: false},
		},
		"DeletedWithForeignObjectInTheWay": {
			reason: "A ConfigMap named like the backup that the agent did not make is not its backup: the deleted agent is gone, and the ConfigMap stays.",
			agent:  agent(deleted),
			objs:   []client.Object{backupNamed(map[string]string{"app": "mine"}, map[string]string{"deployment.apps.web": "1"})},
			want:   managed.ExternalObservation{ResourceExists: false},
		},
		"DeletedWithAnotherAgentsBackup": {
			reason: "Nor is another agent's backup under that name.",
			agent:  agent(deleted),
			objs:   []client.Object{backupNamed(map[string]string{LabelBackupOf: "other"}, nil)},
			want:   managed.ExternalObservation{ResourceExists: false},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c := newExternal(t, append(tc.objs, deployment("apps", "web", 2))...)
			before := read(t, c)
			got, err := e.Observe(context.Background(), tc.agent)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("\n%s\nObserve(...): error %v, want one containing %q", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before, read(t, c)); diff != "" {
				t.Errorf("\n%s\nObserve changed the cluster: -before, +after:\n%s", tc.reason, diff)
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

// TestQuietWindowToldOnce: every reconcile in a quiet window observes it, and
// only the first tells of it; the Acting condition in status is the record.
func TestQuietWindowToldOnce(t *testing.T) {
	ca := agent(func(ca *v1alpha1.ChaosAgent) {
		ca.Spec.ForProvider.TantrumMode = true
		ca.Spec.ForProvider.QuietWindows = []v1alpha1.QuietWindow{{Start: "11:00", End: "13:00"}}
	})
	e, _ := newExternal(t)
	rec := &recorder{}
	e.record = rec
	for range 3 {
		if _, err := e.Observe(context.Background(), ca); err != nil {
			t.Fatal(err)
		}
	}
	want := []event.Event{event.Normal(reasonQuiet, "Nothing happens: quiet window until 2026-03-02T13:00:00Z")}
	if diff := cmp.Diff(want, rec.got); diff != "" {
		t.Errorf("events of three observations: -want, +got:\n%s", diff)
	}
}

func TestActingEvent(t *testing.T) {
	cases := map[string]struct {
		reason string
		was    xpv2.ConditionReason
		now    xpv2.ConditionReason
		msg    string
		want   *event.Event
	}{
		"Unchanged":       {reason: "A reason found again is not news, whatever the message says now.", was: v1alpha1.ReasonStoppedByNamespace, now: v1alpha1.ReasonStoppedByNamespace, msg: "stopped in another namespace"},
		"FirstRound":      {reason: "The first round is not a resumption.", now: v1alpha1.ReasonActing},
		"QuietWindowEnds": {reason: "Nor is the end of a quiet window.", was: v1alpha1.ReasonQuietWindow, now: v1alpha1.ReasonActing},
		"Resumed": {
			reason: "Acting after a stop is.", was: v1alpha1.ReasonStoppedByConfig, now: v1alpha1.ReasonActing,
			want: ptr.To(event.Normal(reasonResumed, "Acting again: ")),
		},
		"QuietWindowBegins": {
			reason: "A quiet window is told when it begins.", was: v1alpha1.ReasonActing, now: v1alpha1.ReasonQuietWindow, msg: "quiet window until 13:00",
			want: ptr.To(event.Normal(reasonQuiet, "Nothing happens: quiet window until 13:00")),
		},
		"QuietWindowFirst": {
			reason: "Also on an agent that never ran.", now: v1alpha1.ReasonQuietWindow, msg: "quiet window until 13:00",
			want: ptr.To(event.Normal(reasonQuiet, "Nothing happens: quiet window until 13:00")),
		},
		"StoppedByConfig": {
			reason: "A stop is a warning.", was: v1alpha1.ReasonActing, now: v1alpha1.ReasonStoppedByConfig, msg: "stopped by the annotation",
			want: ptr.To(event.Warning(reasonStopped, errors.New("Stopped by the annotation"))),
		},
		"StoppedByNamespaceAfterConfig": {
			reason: "A different switch is a different stop.", was: v1alpha1.ReasonStoppedByConfig, now: v1alpha1.ReasonStoppedByNamespace, msg: "stopped in apps",
			want: ptr.To(event.Warning(reasonStopped, errors.New("Stopped in apps"))),
		},
		"Paused": {
			reason: "A failing steady state pauses, as a warning.", was: v1alpha1.ReasonActing, now: v1alpha1.ReasonSteadyStateViolated, msg: "paused",
			want: ptr.To(event.Warning(reasonPaused, errors.New("Paused"))),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got *event.Event
			if ev, ok := actingEvent(tc.was, tc.now, tc.msg); ok {
				got = &ev
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nactingEvent(%q, %q, ...): -want, +got:\n%s", tc.reason, tc.was, tc.now, diff)
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

// TestCreateDoesNothing: Observe never reports a living agent missing, so the managed
// reconciler never calls Create; if it did, nothing would happen.
func TestCreateDoesNothing(t *testing.T) {
	cases := map[string]struct {
		reason string
		agent  *v1alpha1.ChaosAgent
		objs   []client.Object
	}{
		"RoundDue": {
			reason: "A due round is Update's to run, not Create's.",
			agent:  agent(func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.CancerMode = true }),
		},
		"WithBackup": {
			reason: "A backup is not touched.",
			agent:  agent(func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.IpsumMode = true }),
			objs:   []client.Object{settings(original), backupNamed(backupLabels, map[string]string{"deployment.apps.web": "1"})},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c := newExternal(t, append(tc.objs, deployment("apps", "web", 2))...)
			before, status := read(t, c), *tc.agent.Status.DeepCopy()
			got, err := e.Create(context.Background(), tc.agent)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(managed.ExternalCreation{}, got); diff != "" {
				t.Errorf("\n%s\nCreate(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before, read(t, c)); diff != "" {
				t.Errorf("\n%s\nCreate changed the cluster: -before, +after:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(status, tc.agent.Status); diff != "" {
				t.Errorf("\n%s\nCreate changed status: -before, +after:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestUpdateRunsARoundAfterBackingUp(t *testing.T) {
	ipsum := IpsumData(1, "apps", "settings", []string{"app.yaml", "bytes"})
	both := func(ca *v1alpha1.ChaosAgent) {
		ca.Spec.ForProvider.CancerMode, ca.Spec.ForProvider.IpsumMode = true, true
		ca.Spec.ForProvider.MaxActionsPerRound = 2
		ca.Spec.ForProvider.MaxReplicas = 3
	}
	cancer := func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.CancerMode = true }
	cases := map[string]struct {
		reason string
		agent  *v1alpha1.ChaosAgent
		objs   []client.Object
		// changes are what Update changed in the cluster (see cluster.with).
		changes    map[string]any
		wantErr    string
		wantStatus v1alpha1.ChaosAgentObservation
		wantReady  corev1.ConditionStatus
		wantActing xpv2.ConditionReason
	}{
		"ScalesAndRewrites": {
			reason: "A round doubles a Deployment (capped at maxReplicas) and fills a ConfigMap with lorem ipsum, after backing up both originals in a backup it marks as its own.",
			agent:  agent(both),
			objs:   []client.Object{settings(original)},
			changes: map[string]any{
				"apps/web":      int32(3),
				"apps/settings": configMap{Data: ipsum},
				backupOfEdmund:  configMap{Labels: backupLabels, Data: map[string]string{"deployment.apps.web": "2", "configmap.apps.settings": encodeData(original)}},
			},
			wantStatus: v1alpha1.ChaosAgentObservation{RoundsRun: 1, DeploymentsScaled: 1, ConfigMapsRewritten: 1},
			wantReady:  corev1.ConditionTrue,
			wantActing: v1alpha1.ReasonActing,
		},
		"BackupKeepsFirstOriginal": {
			reason:     "A Deployment scaled again keeps the replicas it had before the first scale in the backup.",
			agent:      agent(cancer),
			objs:       []client.Object{backupNamed(backupLabels, map[string]string{"deployment.apps.web": "1"})},
			changes:    map[string]any{"apps/web": int32(4)},
			wantStatus: v1alpha1.ChaosAgentObservation{RoundsRun: 1, DeploymentsScaled: 1},
			wantReady:  corev1.ConditionTrue,
			wantActing: v1alpha1.ReasonActing,
		},
		"ForeignObjectInTheWay": {
			reason:  "A ConfigMap named like the backup that the agent did not make is reported and left alone, and nothing that would need a backup changes.",
			agent:   agent(both),
			objs:    []client.Object{settings(original), backupNamed(map[string]string{"app": "mine"}, map[string]string{"k": "v"})},
			wantErr: `ConfigMap "edmund-chaos-backup" exists but is not the backup of this ChaosAgent`,
		},
		"AnotherAgentsBackupInTheWay": {
			reason:  "So is another agent's backup under that name.",
			agent:   agent(cancer),
			objs:    []client.Object{backupNamed(map[string]string{LabelBackupOf: "other"}, map[string]string{"deployment.apps.web": "7"})},
			wantErr: `ConfigMap "edmund-chaos-backup" exists but is not the backup of this ChaosAgent`,
		},
		"DryRun": {
			reason:     "A dry run counts the round and changes nothing, not even the backup.",
			agent:      agent(func(ca *v1alpha1.ChaosAgent) { cancer(ca); ca.Spec.ForProvider.DryRun = true }),
			wantStatus: v1alpha1.ChaosAgentObservation{RoundsRun: 1},
			wantReady:  corev1.ConditionTrue,
			wantActing: v1alpha1.ReasonActing,
		},
		"StoppedNamespace": {
			reason:     "A namespace's kill switch stops a round that would act only there.",
			agent:      agent(cancer),
			objs:       []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", Annotations: map[string]string{v1alpha1.AnnotationStop: ""}}}},
			wantStatus: v1alpha1.ChaosAgentObservation{RoundsRun: 1, StoppedNamespaces: []string{"apps"}},
			wantReady:  corev1.ConditionTrue,
			wantActing: v1alpha1.ReasonStoppedByNamespace,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c := newExternal(t, append(tc.objs, deployment("apps", "web", 2))...)
			want := read(t, c).with(tc.changes)
			got, err := e.Update(context.Background(), tc.agent)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("\n%s\nUpdate(...): error %v, want one containing %q", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(managed.ExternalUpdate{}, got); diff != "" {
				t.Errorf("\n%s\nUpdate(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(want, read(t, c)); diff != "" {
				t.Errorf("\n%s\ncluster after Update: -want, +got:\n%s", tc.reason, diff)
			}
			o := tc.agent.Status.AtProvider
			gotStatus := v1alpha1.ChaosAgentObservation{RoundsRun: o.RoundsRun, DeploymentsScaled: o.DeploymentsScaled, ConfigMapsRewritten: o.ConfigMapsRewritten, PodsKilled: o.PodsKilled, StoppedNamespaces: o.StoppedNamespaces}
			if diff := cmp.Diff(tc.wantStatus, gotStatus); diff != "" {
				t.Errorf("\n%s\nstatus counters: -want, +got:\n%s", tc.reason, diff)
			}
			if got := tc.agent.GetCondition(xpv2.TypeReady).Status; tc.wantReady != "" && got != tc.wantReady {
				t.Errorf("\n%s\nReady = %s, want %s", tc.reason, got, tc.wantReady)
			}
			if got := tc.agent.GetCondition(v1alpha1.TypeActing).Reason; got != tc.wantActing {
				t.Errorf("\n%s\nActing reason = %q, want %q", tc.reason, got, tc.wantActing)
			}
			for _, a := range o.RecentActions {
				if strings.Contains(a.Before+a.After, "port") {
					t.Errorf("\n%s\nstatus reveals ConfigMap data: %+v", tc.reason, a)
				}
			}
		})
	}
}

func TestDeleteRestoresWhatTheAgentChanged(t *testing.T) {
	ipsum := IpsumData(1, "apps", "settings", []string{"app.yaml", "bytes"})
	backedUp := map[string]string{"deployment.apps.web": "2", "configmap.apps.settings": encodeData(original)}
	cases := map[string]struct {
		reason  string
		agent   *v1alpha1.ChaosAgent
		objs    []client.Object
		changes map[string]any
		wantErr string
	}{
		"RevertsAndRemovesBackup": {
			reason:  "What the agent changed comes back byte for byte, and its backup goes.",
			agent:   agent(deleted),
			objs:    []client.Object{settings(ipsum), backupNamed(backupLabels, backedUp)},
			changes: map[string]any{"apps/web": int32(2), "apps/settings": configMap{Data: original}, backupOfEdmund: (*configMap)(nil)},
		},
		"RevertOffKeepsChanges": {
			reason: "With revertOnDelete off, only the backup goes.",
			agent: agent(func(ca *v1alpha1.ChaosAgent) {
				deleted(ca)
				ca.Spec.ForProvider.RevertOnDelete = ptr.To(false)
			}),
			objs:    []client.Object{settings(ipsum), backupNamed(backupLabels, backedUp)},
			changes: map[string]any{backupOfEdmund: (*configMap)(nil)},
		},
		"NoBackup": {
			reason: "An agent that changed nothing has nothing to restore.",
			agent:  agent(deleted),
			objs:   []client.Object{settings(ipsum)},
		},
		"ForeignObjectInTheWay": {
			reason: "A ConfigMap named like the backup that the agent did not make is neither restored from nor deleted, and does not keep the agent from going.",
			agent:  agent(deleted),
			objs:   []client.Object{settings(ipsum), backupNamed(map[string]string{"app": "mine"}, backedUp)},
		},
		"OutOfReach": {
			reason:  "An original the agent may no longer restore is reported, and the backup kept for when it may.",
			agent:   agent(deleted),
			objs:    []client.Object{deployment("team-a", "api", 4), backupNamed(backupLabels, map[string]string{"deployment.team-a.api": "1"})},
			wantErr: "set revertOnDelete to false",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c := newExternal(t, append(tc.objs, deployment("apps", "web", 3))...)
			want := read(t, c).with(tc.changes)
			got, err := e.Delete(context.Background(), tc.agent)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("\n%s\nDelete(...): error %v, want one containing %q", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(managed.ExternalDelete{}, got); diff != "" {
				t.Errorf("\n%s\nDelete(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(want, read(t, c)); diff != "" {
				t.Errorf("\n%s\ncluster after Delete: -want, +got:\n%s", tc.reason, diff)
			}
			if got := tc.agent.GetCondition(xpv2.TypeReady).Reason; got != xpv2.ReasonDeleting {
				t.Errorf("\n%s\nReady reason = %q, want %q", tc.reason, got, xpv2.ReasonDeleting)
			}
		})
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
	pc := reach.Policy{Config: `ProviderConfig "p"`, OwnNamespace: true, ProviderNamespace: "crossplane-system"}
	cpc := reach.Policy{Config: `ClusterProviderConfig "c"`, OwnNamespace: true, ProviderNamespace: "crossplane-system", Namespaces: []string{"kube-system", "team-*"}}
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
		"RemoteOwnNotGranted": {
			reason: "On another cluster, a namespace named like the agent's is reached only through a grant.",
			check:  checkOf(reach.Policy{Config: `ClusterProviderConfig "remote"`, Namespaces: []string{"team-*"}}), own: "apps", ns: "apps",
		},
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
