package fight

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// syncs is how many times the GitOps applier syncs the Deployment.
const syncs = 5

// gitOpsManifest is the Deployment as it is in Git: no hash annotation, and a
// template annotation that changes with the revision, so each sync is a new
// generation (a real change, which the rollout hears of and reconciles).
func gitOpsManifest(ns string, revision int) string { return gitOpsManifestWithHash(ns, revision, "") }

// gitOpsManifestWithHash is gitOpsManifest with the hash annotation, when hash
// is not empty: a manifest copied from the live object.
func gitOpsManifestWithHash(ns string, revision int, hash string) string {
	extra := ""
	if hash != "" {
		extra = fmt.Sprintf("\n        %s: %q", configrollout.AnnotationHash, hash)
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %s
  labels: {app: web}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        gitops.example.com/revision: "%d"%s
    spec:
      containers:
        - name: web
          image: nginx:1.27
          envFrom:
            - configMapRef: {name: conf}
`, ns, revision, extra)
}

// An applier syncs a manifest the way a GitOps tool does.
type applier func(t *testing.T, manifest string)

// serverSideApply is Flux, or Argo CD with ServerSideApply=true: server-side
// apply under its own field manager, forcing conflicts.
func serverSideApply(t *testing.T, manifest string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("gitops-controller"), client.ForceOwnership); err != nil {
		t.Fatalf("the applier cannot apply: %v", err)
	}
}

// clientSideApply is Argo CD's default: `kubectl apply`, a three-way merge
// against the last-applied-configuration annotation.
func clientSideApply(t *testing.T, manifest string) {
	t.Helper()
	dir := t.TempDir()
	kc, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, file := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "apply", "-f", file).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// TestGitOpsApplierDoesNotFightRollout runs a ConfigRollout next to a GitOps
// tool that keeps applying the Deployment from a manifest without the
// rollout's annotations: first while the rollout only follows the Deployment
// (its baseline in the rollout's status, nothing written to the Deployment),
// then once a change of the configuration has rolled it (the hash in its pod
// template, the lock on its metadata). The rollout's annotations are applied
// under its own field manager, so neither server-side apply (the applier does
// not own the fields) nor kubectl's client-side apply (they were never in its
// last-applied-configuration) removes them: each sync reconciles the rollout,
// which finds the Deployment as it left it and writes nothing, and it never
// rolls again.
func TestGitOpsApplierDoesNotFightRollout(t *testing.T) {
	cases := map[string]struct {
		reason string
		apply  applier
	}{
		"ServerSideApply": {
			reason: "An applier's server-side apply with its own field manager leaves the rollout's annotations alone.",
			apply:  serverSideApply,
		},
		"ClientSideApply": {
			reason: "kubectl apply (client-side, last-applied-configuration) leaves the rollout's annotations alone.",
			apply:  clientSideApply,
		},
	}
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t, "fight-gitops", nil)
			conf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}, Data: map[string]string{"k": "v1"}}
			env.Create(t, conf)
			tc.apply(t, gitOpsManifest(ns, 0))
			cr := &workloadv1alpha1.ConfigRollout{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"},
				Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
					ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
					Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: configrollout.KindDeployment, Name: "web"}},
				}},
			}
			env.Create(t, cr)
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
			web := "/namespaces/" + ns + "/deployments/web"
			revision := 0

			// sync applies the manifest syncs times, and checks after each
			// sync's reconcile of the rollout that the rollout's annotations are
			// as they were (template hash and lock, on d as last read), and
			// after all of them that the rollout wrote nothing, counted no
			// rollout and says the same of what the Deployment runs.
			sync := func(phase string) {
				t.Helper()
				hash, lock := d.Spec.Template.Annotations[configrollout.AnnotationHash], d.Annotations[configrollout.AnnotationLock]
				rollouts, runs := cr.Status.AtProvider.Rollouts, cr.Status.AtProvider.Workloads[0]
				testenv.WaitIdle(t, wait)
				n := mark()
				for range syncs {
					revision++
					before, err := testenv.Reconciles(controller)
					if err != nil {
						t.Fatal(err)
					}
					tc.apply(t, gitOpsManifest(ns, revision))
					// The sync is a new generation: the rollout hears of it and
					// reconciles. Only once that reconcile has run does "nothing
					// written" mean anything.
					testenv.WaitReconciled(t, wait, controller, before)
					if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
						t.Fatal(err)
					}
					if got := d.Spec.Template.Annotations[configrollout.AnnotationHash]; got != hash {
						t.Errorf("%s\n%s: after sync %d the hash annotation = %q, want %q", tc.reason, phase, revision, got, hash)
					}
					if got := d.Annotations[configrollout.AnnotationLock]; got != lock {
						t.Errorf("%s\n%s: after sync %d the lock = %q, want %q", tc.reason, phase, revision, got, lock)
					}
					if got := d.Spec.Template.Annotations["gitops.example.com/revision"]; got != fmt.Sprint(revision) {
						t.Fatalf("sync %d did not apply: revision %q", revision, got)
					}
				}
				if w := writesSince(n, web); len(w) > 0 {
					t.Errorf("%s\n%s: the provider wrote %d times over %d syncs: %v", tc.reason, phase, len(w), syncs, w)
				}
				if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cr), cr); err != nil {
					t.Fatal(err)
				}
				if cr.Status.AtProvider.Rollouts != rollouts {
					t.Errorf("%s\n%s: rollouts %d → %d over %d syncs: the configuration did not change", tc.reason, phase, rollouts, cr.Status.AtProvider.Rollouts, syncs)
				}
				if w := cr.Status.AtProvider.Workloads; len(w) != 1 || w[0].Hash != runs.Hash || w[0].Baseline != runs.Baseline {
					t.Errorf("%s\n%s: status of the Deployment %+v after %d syncs, was %+v: the configuration did not change", tc.reason, phase, w, syncs, runs)
				}
				// Who owns what: the rollout's annotations are its alone.
				for _, f := range d.ManagedFields {
					for _, a := range []string{configrollout.AnnotationHash, configrollout.AnnotationLock} {
						if strings.Contains(f.FieldsV1.GetRawString(), a) && !strings.HasPrefix(f.Manager, "configrollout-") {
							t.Errorf("%s\n%s: field manager %q owns %s too", tc.reason, phase, f.Manager, a)
						}
					}
				}
				writesNothingMore(t, name+" Deployment, "+phase, cr, workloadv1alpha1.ConfigRolloutGroupKind, web)
			}

			// The rollout's creation only starts to follow the Deployment.
			following(t, cr, d, 1)
			sync("followed")
			// A change of the configuration rolls it: the hash is in its template.
			rollFor(t, cr, d, conf)
			sync("rolled")
		})
	}
}

// TestGitOpsManifestThatCarriedTheHash: a manifest copied from the live
// object carries the rollout's hash into kubectl's last-applied-configuration;
// once Git drops it, the next client-side apply removes it (a three-way merge
// deletes what it applied before). The rollout puts it back, once: that apply
// is the last one that owned the field, so the syncs after it leave it alone.
// No fight, but that one sync rolls the pods twice; server-side apply never
// removes a field another manager (the rollout) also owns.
func TestGitOpsManifestThatCarriedTheHash(t *testing.T) {
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	ns := env.Namespace(t, "fight-gitops-copied", nil)
	conf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}, Data: map[string]string{"k": "v1"}}
	env.Create(t, conf)
	clientSideApply(t, gitOpsManifest(ns, 0))
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: configrollout.KindDeployment, Name: "web"}},
		}},
	}
	env.Create(t, cr)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	carries := func(what string) {
		t.Helper()
		testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
				return false, err
			}
			h := cr.Status.AtProvider.Hash
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d)
			return err == nil && h != "" && d.Spec.Template.Annotations[configrollout.AnnotationHash] == h, err
		})
	}
	// The rollout's creation rolls nothing; a change of the configuration
	// writes the hash into the template, where a copy of the live object
	// finds it.
	following(t, cr, d, 1)
	rollFor(t, cr, d, conf)
	carries("the Deployment to carry the rollout's hash")
	hash := cr.Status.AtProvider.Hash
	testenv.WaitIdle(t, wait)

	web := "/namespaces/" + ns + "/deployments/web"
	n := mark()
	// Git now holds a copy of the live object, hash included; then drops it.
	clientSideApply(t, gitOpsManifestWithHash(ns, 1, hash))
	before, err := testenv.Reconciles(controller)
	if err != nil {
		t.Fatal(err)
	}
	clientSideApply(t, gitOpsManifest(ns, 2))
	testenv.WaitReconciled(t, wait, controller, before)
	carries("the rollout to put its hash back")
	if w := writesSince(n, web); len(w) != 1 {
		t.Errorf("the provider wrote %d times when kubectl removed its hash once, want 1: %v", len(w), w)
	}
	n = mark()
	for i := 3; i < 3+syncs; i++ {
		before, err := testenv.Reconciles(controller)
		if err != nil {
			t.Fatal(err)
		}
		clientSideApply(t, gitOpsManifest(ns, i))
		testenv.WaitReconciled(t, wait, controller, before)
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
			t.Fatal(err)
		}
		if got := d.Spec.Template.Annotations[configrollout.AnnotationHash]; got != hash {
			t.Errorf("after sync %d the hash annotation = %q, want %q", i, got, hash)
		}
	}
	if w := writesSince(n, web); len(w) > 0 {
		t.Errorf("the provider wrote %d times over %d syncs after the hash left Git: %v", len(w), syncs, w)
	}
}
