package leastprivilege

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// clusterRoles reads the ClusterRoles of a file of this repository.
func clusterRoles(t *testing.T, file string) []rbacv1.ClusterRole {
	t.Helper()
	objs, err := testenv.ReadObjects(filepath.Join(testenv.RepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	var out []rbacv1.ClusterRole
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		r := rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestProviderAPIRules checks what examples/provider/rbac.yaml grants beyond
// cluster/rbac/provider-rbac.yaml (which hack/xpkg checks): the provider's own
// APIs with only the verbs crossplane-runtime uses on them, and nothing the
// other file grants, so that no rule has two copies.
func TestProviderAPIRules(t *testing.T) {
	roles := clusterRoles(t, filepath.Join("examples", "provider", "rbac.yaml"))
	if len(roles) != 1 {
		t.Fatalf("examples/provider/rbac.yaml has %d ClusterRoles, want 1", len(roles))
	}
	read := []string{"get", "list", "watch"}
	// patch: a metadata-only write (the finalizer) goes as a patch, never
	// writing the spec back.
	mr := []string{"get", "list", "watch", "update", "patch"}
	// patch: a status write of the version the cache holds goes as a patch
	// of the status.
	up := []string{"update", "patch"}
	// finalizers: only the owner references of what the provider creates
	// need them (blockOwnerDeletion), written with the object's update.
	fin := []string{"update"}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"copy.clusterops.io"}, Resources: []string{"copyrules"}, Verbs: mr},
		{APIGroups: []string{"copy.clusterops.io"}, Resources: []string{"copyrules/status"}, Verbs: up},
		{APIGroups: []string{"copy.clusterops.io"}, Resources: []string{"copyrules/finalizers"}, Verbs: fin},
		{APIGroups: []string{"chaos.clusterops.io"}, Resources: []string{"chaosagents"}, Verbs: mr},
		{APIGroups: []string{"chaos.clusterops.io"}, Resources: []string{"chaosagents/status"}, Verbs: up},
		{APIGroups: []string{"chaos.clusterops.io"}, Resources: []string{"chaosagents/finalizers"}, Verbs: fin},
		{APIGroups: []string{"workload.clusterops.io"}, Resources: []string{"appbundles", "immortalcontainers", "configrollouts"}, Verbs: mr},
		{APIGroups: []string{"workload.clusterops.io"}, Resources: []string{"appbundles/status", "immortalcontainers/status", "configrollouts/status"}, Verbs: up},
		{APIGroups: []string{"workload.clusterops.io"}, Resources: []string{"appbundles/finalizers", "immortalcontainers/finalizers", "configrollouts/finalizers"}, Verbs: fin},
		{APIGroups: []string{"clusterops.io"}, Resources: []string{"providerconfigs", "clusterproviderconfigs"}, Verbs: mr},
		{APIGroups: []string{"clusterops.io"}, Resources: []string{"providerconfigs/status", "clusterproviderconfigs/status"}, Verbs: up},
		{APIGroups: []string{"clusterops.io"}, Resources: []string{"providerconfigusages"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: read},
	}
	if diff := cmp.Diff(want, roles[0].Rules); diff != "" {
		t.Errorf("ClusterRole rules: -want, +got:\n%s", diff)
	}

	granted := grantedBy(t, filepath.Join("cluster", "rbac", "provider-rbac.yaml"))
	for _, rule := range roles[0].Rules {
		for _, s := range slices.Concat(rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames, rule.NonResourceURLs) {
			if strings.Contains(s, "*") {
				t.Errorf("rule %+v has wildcard %q", rule, s)
			}
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				if granted[g+"/"+res] {
					t.Errorf("%s %s is granted by both files: keep its rule in cluster/rbac/provider-rbac.yaml only", g, res)
				}
			}
		}
	}
}

// grantedBy is the set of group/resource the ClusterRoles of file grant.
func grantedBy(t *testing.T, file string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, r := range clusterRoles(t, file) {
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					out[g+"/"+res] = true
				}
			}
		}
	}
	return out
}
