package integration

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestExamplesApply applies every file under examples/ that targets the
// provider's own API groups or core kinds: each must be accepted as written.
// examples/platform needs Crossplane core (XRDs, Compositions, claims): the
// platform package checks it against Crossplane's CRDs, and the e2e tier
// applies it through Crossplane.
func TestExamplesApply(t *testing.T) {
	root := filepath.Join(testenv.RepoRoot(), "examples")
	platform := filepath.Join(root, "platform")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && (p == platform || d.Name() == "crossplane") {
			return filepath.SkipDir // Crossplane packages and platform APIs: test/e2e/crossplane applies them.
		}
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
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
	// The Copyrator rule copies into every namespace, other tests' too: it
	// goes, with its copies, once it has shown it works.
	if err := env.Client.Delete(context.Background(), &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "copyrator"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the Copyrator example's copies to be pruned", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: "platform", Name: "copyrator-greeting"}, &corev1.ConfigMap{})
		return kerrors.IsNotFound(err), nil
	})
	// The ImmortalContainer example starts its pod.
	testenv.Eventually(t, wait, "the example ImmortalContainer's pod", func(ctx context.Context) (bool, error) {
		return true, env.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "example-immortalcontainer-immortalpod"}, &corev1.Pod{})
	})
}
