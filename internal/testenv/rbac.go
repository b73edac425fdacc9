package testenv

import (
	"context"
	"maps"
	"path/filepath"
	"slices"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// The provider's identity under the RBAC this repository ships: the
// ServiceAccount it binds.
const (
	ProviderSANamespace = "crossplane-system"
	ProviderSAName      = "provider-clusterops"
)

// WorkloadsBinding is the ClusterRoleBinding of cluster/rbac/provider-rbac.yaml
// that grants what the kinds do to ConfigMaps, Secrets, pods, workloads and
// Leases.
const WorkloadsBinding = "provider-clusterops:workloads"

// shippedRBAC are the RBAC files this repository ships, and which kinds of
// each are applied: the DeploymentRuntimeConfig needs Crossplane.
var shippedRBAC = map[string][]string{
	filepath.Join("cluster", "rbac", "provider-rbac.yaml"): {"ClusterRole", "ClusterRoleBinding"},
	filepath.Join("examples", "provider", "rbac.yaml"):     {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"},
}

// ApplyShippedRBAC applies the RBAC this repository ships as an
// administrator would, binding it to the provider's ServiceAccount; only the
// objects named names, when names are given.
func ApplyShippedRBAC(ctx context.Context, c client.Client, names ...string) error {
	for f, kinds := range shippedRBAC {
		objs, err := ReadObjects(filepath.Join(RepoRoot(), f))
		if err != nil {
			return err
		}
		for _, o := range objs {
			if !slices.Contains(kinds, o.GetKind()) || (len(names) > 0 && !slices.Contains(names, o.GetName())) {
				continue
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("admin"), client.ForceOwnership); err != nil {
				return errors.Wrapf(err, "cannot apply %s %q from %s", o.GetKind(), o.GetName(), f)
			}
		}
	}
	return nil
}

// AsProvider is cfg impersonating the provider's ServiceAccount, with the
// groups a token of it would carry.
func AsProvider(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ProviderSANamespace + ":" + ProviderSAName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ProviderSANamespace, "system:authenticated"},
	}
	return out
}

// ShippedRBACFiles are the RBAC files ApplyShippedRBAC applies, relative to
// the repository's root.
func ShippedRBACFiles() []string { return slices.Sorted(maps.Keys(shippedRBAC)) }
