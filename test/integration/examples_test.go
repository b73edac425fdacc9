package integration

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestEveryExampleAppliesAsWritten applies every file under examples/ that targets the
// provider's own API groups or core kinds: each must be accepted as written.
// examples/platform needs Crossplane core (XRDs, Compositions, claims): the
// platform package checks it against Crossplane's CRDs, and the e2e tier
// applies it through Crossplane. examples/monitoring needs the Prometheus
// Operator's CRDs, which no tier installs: hack/monitoring checks it.
func TestEveryExampleAppliesAsWritten(t *testing.T) {
	root := filepath.Join(testenv.RepoRoot(), "examples")
	platform := filepath.Join(root, "platform")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && (p == platform || d.Name() == "crossplane") {
			return filepath.SkipDir // Crossplane packages and platform APIs: test/e2e/crossplane applies them.
		}
		if err == nil && d.IsDir() && d.Name() == "monitoring" {
			// A PodMonitor and a PrometheusRule, kinds of the Prometheus Operator, whose CRDs
			// this API server does not have: hack/monitoring generates them from the
			// operator's Go types and checks them (make test-monitoring), and the e2e tier
			// runs their rules in Prometheus (TestAlertsFireOnARealPrometheus).
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") && !needsSecondCluster(t, p) {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found under %s: %v", root, err)
	}
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, root+"/"), func(t *testing.T) {
			if _, err := testenv.ApplyFile(context.Background(), env.Client, f); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The copy examples copy: the Copyrator ConfigMap into the platform
	// namespace, the pull secret into the labelled team namespace.
	testenv.Eventually(t, wait, "the Copyrator example's copy", func(ctx context.Context) (bool, error) {
		return true, env.Client.Get(ctx, types.NamespacedName{Namespace: "platform", Name: "copyrator-greeting"}, &corev1.ConfigMap{})
	})
	testenv.Eventually(t, wait, "the pull secret example's copy", func(ctx context.Context) (bool, error) {
		return true, env.Client.Get(ctx, types.NamespacedName{Namespace: "team-payments", Name: "registry-pull"}, &corev1.Secret{})
	})
	testenv.Eventually(t, wait, "the network baseline example's copy", func(ctx context.Context) (bool, error) {
		return true, env.Client.Get(ctx, types.NamespacedName{Namespace: "team-orders", Name: "default-deny-ingress"}, &networkingv1.NetworkPolicy{})
	})
	// The database endpoint example copies two keys of a Secret, renamed,
	// into a ConfigMap of another name, without the password or the GitOps
	// tool's labels.
	endpoint := &corev1.ConfigMap{}
	testenv.Eventually(t, wait, "the database endpoint example's ConfigMap", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: "team-payments", Name: "orders-db-endpoint"}, endpoint); err != nil {
			return false, err
		}
		_, argo := endpoint.Labels["argocd.argoproj.io/instance"]
		_, app := endpoint.Labels["app.kubernetes.io/name"]
		return len(endpoint.Data) == 2 && endpoint.Data["DB_HOST"] == "orders-db.platform.svc" && endpoint.Data["DB_PORT"] == "5432" &&
			!argo && !app && endpoint.Labels["copied-from"] == "platform" && endpoint.Labels["tier"] == "database" &&
			endpoint.Annotations["owner"] == "platform-team@example.com", nil
	})
	// The several-sources example copies from both source namespaces, each
	// copy naming the namespace it came from.
	for _, src := range []string{"team-a", "team-b"} {
		testenv.Eventually(t, wait, "the several-sources example's copy from "+src, func(ctx context.Context) (bool, error) {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: "shared-config-consumer", Name: src + "-endpoints"}, cm); err != nil {
				return false, err
			}
			return cm.Annotations["copy.clusterops.io/source"] == src+"-config/"+src+"-endpoints", nil
		})
	}
	// The Copyrator rule copies into every namespace, other tests' too: it
	// goes, with its copies, once it has shown it works.
	if err := env.Client.Delete(context.Background(), &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "copyrator"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the Copyrator example's copies to be pruned", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: "platform", Name: "copyrator-greeting"}, &corev1.ConfigMap{})
		return kerrors.IsNotFound(err), nil
	})
	// The plan-first example plans its two copies and makes none.
	planFirst := &copyv1alpha1.CopyRule{}
	testenv.Eventually(t, wait, "the plan-first example's plan", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: "platform", Name: "search-tuning"}, planFirst)
		p := planFirst.Status.AtProvider.Plan
		return p != nil && p.Summary == "Create 2", err
	})
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: "team-search", Name: "search-tuning"}, &corev1.ConfigMap{}); !kerrors.IsNotFound(err) {
		t.Errorf("the plan-first example made a copy: %v", err)
	}
	// The ImmortalContainer example starts its pod.
	testenv.Eventually(t, wait, "the example ImmortalContainer's pod", func(ctx context.Context) (bool, error) {
		return true, env.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "example-immortalcontainer-immortalpod"}, &corev1.Pod{})
	})
}

// needsSecondCluster reports whether example p says on its first line that
// it needs a second cluster (make demo leaves it out too): such an example's
// own test applies it with one.
func needsSecondCluster(t *testing.T, p string) bool {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.HasPrefix(first, "# examples: needs a second cluster")
}
