package integration

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestExamplesApply applies every file under examples/ that targets the
// provider's own API groups or core kinds: each must be accepted as written.
// Files for Crossplane core (XRDs, Compositions, claims) are applied by the e2e tier.
func TestExamplesApply(t *testing.T) {
	root := filepath.Join(testenv.RepoRoot(), "examples")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
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
	// The ImmortalContainer example starts its pod.
	testenv.Eventually(t, wait, "the example ImmortalContainer's pod", func(ctx context.Context) (bool, error) {
		return true, env.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "example-immortalcontainer-immortalpod"}, &corev1.Pod{})
	})
}
