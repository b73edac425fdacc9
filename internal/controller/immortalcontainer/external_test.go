package immortalcontainer

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// The table tests of the external client: each branch of Observe, Create,
// Update and Delete against controller-runtime's fake client, asserting what
// the call returned and which pods the cluster holds afterwards (by UID), so
// that a row also proves what was left alone.

func immortal(deleting bool) *v1alpha1.ImmortalContainer {
	ic := &v1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "ic-uid"},
		Spec:       v1alpha1.ImmortalContainerSpec{ForProvider: v1alpha1.ImmortalContainerParameters{Image: "nginx:1.27"}},
	}
	if deleting {
		ic.SetDeletionTimestamp(&metav1.Time{Time: created})
		ic.SetFinalizers([]string{"finalizer.managedresource.crossplane.io"})
	}
	return ic
}

// ownPod is the ImmortalContainer's own pod, as desiredPod makes it, with uid and
// phase; mutate changes it further.
func ownPod(uid string, phase corev1.PodPhase, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := desiredPod(immortal(false), false)
	p.UID = types.UID(uid)
	p.CreationTimestamp = metav1.NewTime(created)
	p.Status.Phase = phase
	if phase == corev1.PodRunning {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	if phase == corev1.PodFailed {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Error", ExitCode: 1, FinishedAt: metav1.NewTime(created),
		}}}}
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// foreign is a pod named like the ImmortalContainer's that it did not make.
func foreign(p *corev1.Pod) { p.Labels = map[string]string{"app": "someone-else"} }

func stale(p *corev1.Pod) { p.Annotations[annotationSpecHash] = "an-older-spec" }

// inShard3 puts an ImmortalContainer in shard 3 of a sharded provider.
func inShard3(ic *v1alpha1.ImmortalContainer) *v1alpha1.ImmortalContainer {
	ic.SetLabels(map[string]string{shard.Label: "3"})
	return ic
}

// shardLabel is the shard label the pod carries, "-" for none.
func shardLabel(e *external) (string, error) {
	p := &corev1.Pod{}
	if err := e.cluster.Client.Get(context.Background(), types.NamespacedName{Namespace: "apps", Name: "web-immortalpod"}, p); err != nil {
		return "", err
	}
	if v, ok := p.Labels[shard.Label]; ok {
		return v, nil
	}
	return "-", nil
}

// pods returns the UIDs of the pods the cluster holds, "new" for one without
// (created by the call under test: the fake client does not set UIDs).
func pods(t *testing.T, e *external) []string {
	t.Helper()
	l := &corev1.PodList{}
	if err := e.cluster.Client.List(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, p := range l.Items {
		uid := string(p.UID)
		if uid == "" {
			uid = "new"
		}
		out = append(out, uid)
	}
	slices.Sort(out)
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestExternalObserve(t *testing.T) {
	cases := map[string]struct {
		reason   string
		ic       *v1alpha1.ImmortalContainer
		existing []client.Object
		want     managed.ExternalObservation
		wantErr  string
		wantPods []string
	}{
		"NoPod": {
			reason: "Without a pod the resource does not exist, so that Create makes one.",
			ic:     immortal(false), want: managed.ExternalObservation{ResourceExists: false},
			wantPods: []string{},
		},
		"Running": {
			reason:   "Its pod running with the current spec is up to date.",
			ic:       immortal(false),
			existing: []client.Object{ownPod("p1", corev1.PodRunning)},
			want:     managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
			wantPods: []string{"p1"},
		},
		"SpecChanged": {
			reason:   "A pod made for another spec is not up to date, so that Update replaces it.",
			ic:       immortal(false),
			existing: []client.Object{ownPod("p1", corev1.PodRunning, stale)},
			want:     managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false},
			wantPods: []string{"p1"},
		},
		"EndedFirstSeen": {
			reason:   "An end seen for the first time is recorded (the backoff depends on it) before the pod is reported gone.",
			ic:       immortal(false),
			existing: []client.Object{ownPod("p1", corev1.PodFailed)},
			want:     managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
			wantPods: []string{"p1"},
		},
		"ShardLabelMissing": {
			reason:   "A pod without the shard label its ImmortalContainer carries (made before sharding, or before a move) is not up to date, so that Update labels it.",
			ic:       inShard3(immortal(false)),
			existing: []client.Object{ownPod("p1", corev1.PodRunning)},
			want:     managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false},
			wantPods: []string{"p1"},
		},
		"Terminating": {
			reason: "A pod being deleted exists and is up to date: its deletion event brings the next reconcile.",
			ic:     immortal(false),
			existing: []client.Object{ownPod("p1", corev1.PodRunning, func(p *corev1.Pod) {
				p.Finalizers = []string{"example.com/hold"}
				p.DeletionTimestamp = &metav1.Time{Time: created}
			})},
			want:     managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
			wantPods: []string{"p1"},
		},
		"ForeignInTheWay": {
			reason:   "A pod of that name the ImmortalContainer did not make is an error to report, and is left alone.",
			ic:       immortal(false),
			existing: []client.Object{ownPod("theirs", corev1.PodRunning, foreign)},
			wantErr:  "was not created by this ImmortalContainer",
			wantPods: []string{"theirs"},
		},
		"ForeignWhileDeleting": {
			reason:   "A foreign pod never keeps the ImmortalContainer from being deleted: it is not its own, so nothing exists.",
			ic:       immortal(true),
			existing: []client.Object{ownPod("theirs", corev1.PodRunning, foreign)},
			want:     managed.ExternalObservation{ResourceExists: false},
			wantPods: []string{"theirs"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newExternal(t, tc.existing...)
			got, err := e.Observe(context.Background(), tc.ic)
			if !strings.Contains(errText(err), tc.wantErr) || (tc.wantErr == "") != (err == nil) {
				t.Fatalf("%s\nObserve(...): error %v, want one containing %q", tc.reason, err, tc.wantErr)
			}
			if err == nil {
				got.ConnectionDetails = nil
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
				}
			}
			if diff := cmp.Diff(tc.wantPods, pods(t, e)); diff != "" {
				t.Errorf("%s\nObserve changed the cluster's pods: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestExternalCreateUpdateDelete(t *testing.T) {
	cases := map[string]struct {
		reason   string
		ic       *v1alpha1.ImmortalContainer
		existing []client.Object
		call     func(e *external, ic *v1alpha1.ImmortalContainer) error
		wantErr  string
		wantPods []string
	}{
		"CreateMakesThePod": {
			reason: "Create makes the pod when there is none.",
			ic:     immortal(false),
			call: func(e *external, ic *v1alpha1.ImmortalContainer) error {
				_, err := e.Create(context.Background(), ic)
				return err
			},
			wantPods: []string{"new"},
		},
		"CreateRemovesTheEndedPodFirst": {
			reason:   "An ended pod of its own still holds the name: Create deletes it, and its deletion event brings the next create.",
			ic:       immortal(false),
			existing: []client.Object{ownPod("p1", corev1.PodFailed)},
			call: func(e *external, ic *v1alpha1.ImmortalContainer) error {
				_, err := e.Create(context.Background(), ic)
				return err
			},
			wantPods: []string{},
		},
		"CreateLeavesAForeignPod": {
			reason:   "A foreign pod in the way is reported and never deleted or replaced.",
			ic:       immortal(false),
			existing: []client.Object{ownPod("theirs", corev1.PodRunning, foreign)},
			call: func(e *external, ic *v1alpha1.ImmortalContainer) error {
				_, err := e.Create(context.Background(), ic)
				return err
			},
			wantErr:  "was not created by this ImmortalContainer",
			wantPods: []string{"theirs"},
		},
		"UpdateReplacesAStalePod": {
			reason:   "Update deletes a pod of an older spec; the replacement comes on its deletion event.",
			ic:       immortal(false),
			existing: []client.Object{ownPod("p1", corev1.PodRunning, stale)},
			call: func(e *external, ic *v1alpha1.ImmortalContainer) error {
				_, err := e.Update(context.Background(), ic)
				return err
			},
			wantPods: []string{},
		},
		"UpdateLabelsInPlace": {
			reason:   "A pod of the current spec that lacks its ImmortalContainer's shard label is labelled, not replaced: moving to another shard restarts nothing.",
			ic:       inShard3(immortal(false)),
			existing: []client.Object{ownPod("p1", corev1.PodRunning)},
			call: func(e *external, ic *v1alpha1.ImmortalContainer) error {
				if _, err := e.Update(context.Background(), ic); err != nil {
					return err
				}
				got, err := shardLabel(e)
				if err == nil && got != "3" {
					err = errors.Errorf("pod labelled shard %q, want 3", got)
				}
				return err
			},
			wantPods: []string{"p1"},
		},
		"UpdateWithoutPod": {
			reason: "Update of an ImmortalContainer whose pod is already gone does nothing.",
			ic:     immortal(false),
			call: func(e *external, ic *v1alpha1.ImmortalContainer) error {
				_, err := e.Update(context.Background(), ic)
				return err
			},
			wantPods: []string{},
		},
		"DeleteRemovesItsPod": {
			reason:   "Delete removes the pod it made.",
			ic:       immortal(true),
			existing: []client.Object{ownPod("p1", corev1.PodRunning)},
			call: func(e *external, ic *v1alpha1.ImmortalContainer) error {
				_, err := e.Delete(context.Background(), ic)
				return err
			},
			wantPods: []string{},
		},
		"DeleteLeavesAForeignPod": {
			reason:   "Delete never removes a pod it did not make, and does not fail on it: the ImmortalContainer goes.",
			ic:       immortal(true),
			existing: []client.Object{ownPod("theirs", corev1.PodRunning, foreign)},
			call: func(e *external, ic *v1alpha1.ImmortalContainer) error {
				_, err := e.Delete(context.Background(), ic)
				return err
			},
			wantPods: []string{"theirs"},
		},
		"DeleteWithoutPod": {
			reason: "Delete succeeds when the pod is already gone.",
			ic:     immortal(true),
			call: func(e *external, ic *v1alpha1.ImmortalContainer) error {
				_, err := e.Delete(context.Background(), ic)
				return err
			},
			wantPods: []string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newExternal(t, tc.existing...)
			e.now = func() time.Time { return created.Add(time.Hour) }
			err := tc.call(e, tc.ic)
			if !strings.Contains(errText(err), tc.wantErr) || (tc.wantErr == "") != (err == nil) {
				t.Fatalf("%s\nerror %v, want one containing %q", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantPods, pods(t, e)); diff != "" {
				t.Errorf("%s\nthe cluster's pods: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestCreateUsesObservesRead: Create decides from the pod Observe read in the
// same reconcile, not from a second GET; a read after it goes to the API
// server again.
func TestCreateUsesObservesRead(t *testing.T) {
	e := newExternal(t)
	gets := 0
	e.cluster.Client = interceptor.NewClient(e.cluster.Client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		},
		// The API server gives a new pod its UID; the fake client does not.
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			obj.SetUID("pod-uid")
			return c.Create(ctx, obj, opts...)
		},
	})
	ic := immortal(false)
	if o, err := e.Observe(context.Background(), ic); err != nil || o.ResourceExists {
		t.Fatalf("Observe(...) = %+v, %v; want the pod missing", o, err)
	}
	if _, err := e.Create(context.Background(), ic); err != nil {
		t.Fatal(err)
	}
	if gets != 1 {
		t.Errorf("Observe and Create sent %d GETs, want 1", gets)
	}
	if pod, err := e.current(context.Background(), ic); err != nil || pod == nil || gets != 2 {
		t.Errorf("a read after Create: %v, %v after %d GETs; want the new pod, read from the API server", pod, err, gets)
	}
	if ic.Status.AtProvider.StartTimes != 1 || ic.Status.AtProvider.CurrentPod != PodName(ic) {
		t.Errorf("status after Create: %+v; want the pod, started once", ic.Status.AtProvider)
	}
}

// TestStartCountedWhenItsStatusWasLost: Create makes a pod and counts it,
// the status write of that reconcile is lost, and the pod is deleted before
// an Observe sees it: the next Observe still counts it, once, and reports no
// drift; once a status read back counts it, it is counted from there.
func TestStartCountedWhenItsStatusWasLost(t *testing.T) {
	ctx := context.Background()
	made := newCreatedPods()
	e := newExternal(t)
	e.created = made
	ic := immortal(false)
	ic.Status.AtProvider.StartTimes, ic.Status.AtProvider.PodUID = 1, "first"
	read := ic.Status.AtProvider.DeepCopy() // The status as the API server keeps it.
	if _, err := e.Observe(ctx, ic); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, ic); err != nil {
		t.Fatal(err)
	}
	if got := ic.Status.AtProvider.StartTimes; got != 2 {
		t.Fatalf("startTimes after Create = %d, want 2", got)
	}
	// The status write is lost; the pod is deleted before an Observe.
	pod := &corev1.Pod{}
	if err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: "apps", Name: PodName(ic)}, pod); err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		ic.Status.AtProvider = *read.DeepCopy()
		next := &external{cluster: e.cluster, record: e.record, now: e.now, created: made}
		if _, err := next.Observe(ctx, ic); err != nil {
			t.Fatal(err)
		}
		if got := ic.Status.AtProvider.StartTimes; got != 2 {
			t.Errorf("round %d: startTimes = %d, want 2: the pod made and gone unseen counts once", round, got)
		}
		if next.deleted != nil {
			t.Errorf("round %d: reported drift %+v for a pod gone unseen", round, *next.deleted)
		}
	}
	// This time the status write lands: it is counted from status alone.
	read = ic.Status.AtProvider.DeepCopy()
	ic.Status.AtProvider = *read.DeepCopy()
	if _, err := (&external{cluster: e.cluster, record: e.record, now: e.now, created: made}).Observe(ctx, ic); err != nil {
		t.Fatal(err)
	}
	if got := ic.Status.AtProvider.StartTimes; got != 2 {
		t.Errorf("startTimes = %d once status counts the pod, want 2", got)
	}
	if len(made.byIC) != 0 {
		t.Errorf("still remembered once status counts it: %+v", made.byIC)
	}
}
