// Package changelog tests that, with change logs on, every create, update and
// delete the managed reconciler performs for each kind reaches a change-log
// gRPC service, and that no Secret bytes do. It has a provider of its own:
// the change logger is the provider's, and counting entries exactly needs a
// provider that no other test's managed resources go through.
package changelog

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	changelogsv1alpha1 "github.com/crossplane/crossplane-runtime/v2/apis/changelogs/proto/v1alpha1"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var (
	env     *testenv.Env
	changes = &changeLogServer{}
	logs    = &testenv.SyncBuffer{}
)

// wait is how long a test waits for the provider to react.
const wait = 30 * time.Second

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Not t.TempDir's long path: a unix socket's path is limited to about
	// 100 bytes.
	dir, err := os.MkdirTemp("", "changelogs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "changelogs.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := grpc.NewServer()
	changelogsv1alpha1.RegisterChangeLogServiceServer(srv, changes)
	go srv.Serve(lis) //nolint:errcheck // Stops with the test binary.
	defer srv.Stop()
	return testenv.Main(m, time.Hour, func(e *testenv.Env) {
		env, e.ChangeLogSocket, e.Log = e, sock, logs
	}, nil)
}

// changeLogServer is a change-log service as crossplane-runtime's proto
// defines it, as Crossplane's changelogs sidecar serves it: it keeps every
// entry it receives.
type changeLogServer struct {
	changelogsv1alpha1.UnimplementedChangeLogServiceServer

	mu      sync.Mutex
	entries []*changelogsv1alpha1.ChangeLogEntry
}

func (s *changeLogServer) SendChangeLog(_ context.Context, r *changelogsv1alpha1.SendChangeLogRequest) (*changelogsv1alpha1.SendChangeLogResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, _ := proto.Clone(r.GetEntry()).(*changelogsv1alpha1.ChangeLogEntry)
	s.entries = append(s.entries, e)
	return &changelogsv1alpha1.SendChangeLogResponse{}, nil
}

func (s *changeLogServer) all() []*changelogsv1alpha1.ChangeLogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*changelogsv1alpha1.ChangeLogEntry(nil), s.entries...)
}

// An op is what an entry says was done to which managed resource.
type op struct {
	Kind, Name, Operation, Error string
}

// ops are the entries about the managed resources in namespace ns, in the
// order the service received them. An entry names no namespace: its snapshot
// of the managed resource does.
func ops(ns string) []op {
	var out []op
	for _, e := range changes.all() {
		meta := e.GetSnapshot().GetFields()["metadata"].GetStructValue().GetFields()
		if meta["namespace"].GetStringValue() != ns {
			continue
		}
		out = append(out, op{Kind: e.GetKind(), Name: e.GetName(), Operation: e.GetOperation().String(), Error: e.GetErrorMessage()})
	}
	return out
}

// expected are the entries expect last waited for, by namespace.
var expected sync.Map

// expect waits until the service has received exactly want about namespace
// ns, and fails at once when it received anything else.
func expect(t *testing.T, ns, kind, name string, want ...changelogsv1alpha1.OperationType) {
	t.Helper()
	w := make([]op, 0, len(want))
	for _, o := range want {
		w = append(w, op{Kind: kind, Name: name, Operation: o.String()})
	}
	expected.Store(ns, w)
	testenv.Eventually(t, wait, fmt.Sprintf("%d change-log entries of %s %s", len(w), kind, name), func(context.Context) (bool, error) {
		got := ops(ns)
		if len(got) > len(w) || cmp.Diff(w[:len(got)], got, cmpopts.EquateEmpty()) != "" {
			t.Fatalf("change-log entries of %s %s: -want, +got:\n%s", kind, name, cmp.Diff(w, got))
		}
		if len(got) < len(w) {
			return false, fmt.Errorf("got %v", got)
		}
		return true, nil
	})
}

// deleteAndWait deletes o and waits until it is gone.
func deleteAndWait(t *testing.T, o client.Object) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
		return kerrors.IsNotFound(err), nil
	})
}

// until waits until cond holds of a fresh read of o.
func until[T client.Object](t *testing.T, o T, what string, cond func(o T) bool) {
	t.Helper()
	testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
		return err == nil && cond(o), err
	})
}

func deployment(ns, name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// Recognisable Secret values that no change-log entry, log line or event may
// contain, in any encoding.
const (
	canary      = "cl-canary-7f3e9a1d-do-not-log"
	canaryAfter = "cl-canary-b42c60e8-do-not-log"
)

const (
	opCreate = changelogsv1alpha1.OperationType_OPERATION_TYPE_CREATE
	opUpdate = changelogsv1alpha1.OperationType_OPERATION_TYPE_UPDATE
	opDelete = changelogsv1alpha1.OperationType_OPERATION_TYPE_DELETE
)

// TestEveryWriteReachesTheChangeLogOnceInOrder drives each kind through the operations the managed
// reconciler performs for it, and checks that each reaches the change-log
// service as exactly one entry, in order. CopyRule, ChaosAgent and
// ConfigRollout never create: their Observe reports them as existing from the
// start (they act on what exists), so their first writes are updates.
func TestEveryWriteReachesTheChangeLogOnceInOrder(t *testing.T) {
	ctx := context.Background()

	t.Run("AppBundle", func(t *testing.T) {
		ns := env.Namespace(t, "team-cl-bundle", nil)
		ab := &workloadv1alpha1.AppBundle{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec:       workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx:1.21"}},
		}
		env.Create(t, ab)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
		until(t, d, "the Deployment", func(*appsv1.Deployment) bool { return true })
		expect(t, ns, "AppBundle", "web", opCreate)

		env.Update(t, ab, func() { ab.Spec.ForProvider.Image = "nginx:1.27" })
		until(t, d, "the Deployment to run nginx:1.27", func(d *appsv1.Deployment) bool {
			return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27"
		})
		expect(t, ns, "AppBundle", "web", opCreate, opUpdate)

		deleteAndWait(t, ab)
		expect(t, ns, "AppBundle", "web", opCreate, opUpdate, opDelete)
	})

	t.Run("ImmortalContainer", func(t *testing.T) {
		ns := env.Namespace(t, "team-cl-immortal", nil)
		ic := &workloadv1alpha1.ImmortalContainer{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec:       workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx:1.21"}},
		}
		env.Create(t, ic)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-immortalpod", Namespace: ns}}
		until(t, pod, "the pod", func(*corev1.Pod) bool { return true })
		expect(t, ns, "ImmortalContainer", "web", opCreate)

		// A changed image replaces the pod: Update deletes it, and Create
		// makes its successor.
		env.Update(t, ic, func() { ic.Spec.ForProvider.Image = "nginx:1.27" })
		until(t, pod, "the pod to run nginx:1.27", func(p *corev1.Pod) bool {
			return p.Spec.Containers[0].Image == "nginx:1.27"
		})
		expect(t, ns, "ImmortalContainer", "web", opCreate, opUpdate, opCreate)

		deleteAndWait(t, ic)
		expect(t, ns, "ImmortalContainer", "web", opCreate, opUpdate, opCreate, opDelete)
	})

	t.Run("CopyRule", func(t *testing.T) {
		src := env.Namespace(t, "team-cl-copy-src", nil)
		dst := env.Namespace(t, "team-cl-copy-dst", nil)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: src}, StringData: map[string]string{"token": canary}}
		env.Create(t, s)
		r := &copyv1alpha1.CopyRule{
			ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: src},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: copyv1alpha1.KindSecret, Names: []string{"token"}, Namespaces: []string{dst},
				ConflictPolicy: copyv1alpha1.ConflictSkip, MaxParallelWrites: 8,
			}},
		}
		env.Create(t, r)
		cp := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: dst}}
		until(t, cp, "the copy", func(c *corev1.Secret) bool { return string(c.Data["token"]) == canary })
		expect(t, src, "CopyRule", "token", opUpdate)

		env.Update(t, s, func() { s.StringData = map[string]string{"token": canaryAfter} })
		until(t, cp, "the copy to follow", func(c *corev1.Secret) bool { return string(c.Data["token"]) == canaryAfter })
		expect(t, src, "CopyRule", "token", opUpdate, opUpdate)

		deleteAndWait(t, r)
		expect(t, src, "CopyRule", "token", opUpdate, opUpdate, opDelete)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cp), cp); !kerrors.IsNotFound(err) {
			t.Errorf("the copy outlived the rule: %v", err)
		}
	})

	t.Run("ConfigRollout", func(t *testing.T) {
		ns := env.Namespace(t, "team-cl-rollout", nil)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: ns}, StringData: map[string]string{"token": canary}}
		d := deployment(ns, "app")
		env.Create(t, s, d)
		cr := &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				Secrets:   []workloadv1alpha1.SourceRef{{Name: "token"}},
				Workloads: []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "app"}},
			}},
		}
		env.Create(t, cr)
		hash := func(d *appsv1.Deployment) string {
			return d.Spec.Template.Annotations["workload.clusterops.io/config-hash"]
		}
		// Following the Deployment writes nothing, so it logs nothing.
		until(t, cr, "the Deployment to be followed", func(cr *workloadv1alpha1.ConfigRollout) bool {
			w := cr.Status.AtProvider.Workloads
			return len(w) == 1 && w[0].Baseline && cr.Status.AtProvider.Hash != ""
		})
		expect(t, ns, "ConfigRollout", "app")

		env.Update(t, s, func() { s.StringData = map[string]string{"token": canaryAfter} })
		until(t, d, "the Deployment to be rolled", func(d *appsv1.Deployment) bool { return hash(d) != "" })
		expect(t, ns, "ConfigRollout", "app", opUpdate)

		deleteAndWait(t, cr)
		expect(t, ns, "ConfigRollout", "app", opUpdate, opDelete)
	})

	t.Run("ChaosAgent", func(t *testing.T) {
		ns := env.Namespace(t, "team-cl-chaos", nil)
		victim := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: ns}, Data: map[string]string{"k": "original"}}
		env.Create(t, victim)
		// One round (the interval is an hour), which rewrites the ConfigMap.
		ca := &chaosv1alpha1.ChaosAgent{
			ObjectMeta: metav1.ObjectMeta{Name: "chaos", Namespace: ns},
			Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
				IpsumMode: true, Eagerness: 100, MaxActionsPerRound: 1,
				Interval: metav1.Duration{Duration: time.Hour}, Seed: ptr.To[int64](1605),
			}},
		}
		env.Create(t, ca)
		until(t, ca, "the agent's round", func(ca *chaosv1alpha1.ChaosAgent) bool { return ca.Status.AtProvider.RoundsRun == 1 })
		expect(t, ns, "ChaosAgent", "chaos", opUpdate)

		// Delete reverts the ConfigMap from the backup.
		deleteAndWait(t, ca)
		expect(t, ns, "ChaosAgent", "chaos", opUpdate, opDelete)
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "victim"}, victim); err != nil || victim.Data["k"] != "original" {
			t.Errorf("the ConfigMap was not reverted: %v %v", victim.Data, err)
		}
	})

	t.Run("NothingMore", func(t *testing.T) {
		// No entry came after the last one each kind waited for.
		expected.Range(func(ns, want any) bool {
			if diff := cmp.Diff(want, ops(ns.(string))); diff != "" {
				t.Errorf("change-log entries in namespace %s: -want, +got:\n%s", ns, diff)
			}
			return true
		})
	})

	t.Run("NoSecretBytes", func(t *testing.T) {
		var needles []string
		for _, c := range []string{canary, canaryAfter} {
			needles = append(needles, c, base64.StdEncoding.EncodeToString([]byte(c)))
		}
		entries := changes.all()
		if len(entries) == 0 {
			t.Fatal("the change-log service received nothing")
		}
		for _, e := range entries {
			b, err := protojson.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if e.GetProvider() == "" {
				t.Errorf("entry of %s %s names no provider", e.GetKind(), e.GetName())
			}
			for _, n := range needles {
				if strings.Contains(string(b), n) {
					t.Errorf("the %s entry of %s %s contains Secret bytes", e.GetOperation(), e.GetKind(), e.GetName())
				}
			}
		}
		// Nor do the provider's logs or any event.
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events); err != nil {
			t.Fatal(err)
		}
		for _, n := range needles {
			if strings.Contains(logs.String(), n) {
				t.Errorf("the provider's logs contain Secret bytes")
			}
			for _, ev := range events.Items {
				if strings.Contains(ev.Message, n) {
					t.Errorf("event %s/%s contains Secret bytes", ev.Namespace, ev.Name)
				}
			}
		}
	})
}
