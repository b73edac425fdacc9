package leastprivilege

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestBinaryUnderShippedRBAC runs cmd/provider as users run it outside
// Crossplane, as the ServiceAccount: what the in-process provider skips,
// leader election (Leases) and safe-start (CRDs), must be allowed too.
func TestBinaryUnderShippedRBAC(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "provider")
	build := exec.Command("go", "build", "-o", bin, "./cmd/provider")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build cmd/provider: %v\n%s", err, out)
	}

	kubeconfig := impersonating(t, dir, saName)

	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.SyncBuffer{}
	cmd := exec.CommandContext(ctx, bin, "--debug", "--leader-election", "--namespace", saNamespace,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})

	testenv.Eventually(t, wait, "the provider to lead and start its controllers behind the safe-start gate", func(ctx context.Context) (bool, error) {
		if r := refused(out.String()); len(r) > 0 {
			return false, errors.Errorf("refused: %s", r[0])
		}
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: saNamespace, Name: "provider-clusterops"}, l); err != nil {
			return false, err
		}
		// Five kinds and two configs.
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && strings.Count(out.String(), "Starting workers") >= 7, nil
	})
	for _, line := range refused(out.String()) {
		t.Errorf("the provider was refused: %s", line)
	}
}

// impersonating writes into dir an admin kubeconfig that impersonates the
// ServiceAccount sa of saNamespace, as `kubectl --as` would, with the groups
// a token of it would carry, and returns its path.
func impersonating(t *testing.T, dir, sa string) string {
	t.Helper()
	admin, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + saNamespace + ":" + sa
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// refused returns the lines of the provider's log that report a forbidden request.
func refused(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			out = append(out, line)
		}
	}
	return out
}
