package leastprivilege

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// grantFile is the RBAC the provider needs to copy kinds beyond ConfigMaps
// and Secrets, one ClusterRole and binding per kind.
var grantFile = filepath.Join("cluster", "rbac", "copy-kinds.yaml")

// TestCopyKindNeedsItsGrant: a rule of a kind the shipped RBAC does not
// grant is a condition naming the resource and the file that grants it, and
// copies once an administrator applies that kind's grant, and only it. Until
// then the provider asks (an access review) rather than tries: it sends no
// request the API server refuses, and so runs no watch of the kind that
// would retry its list for as long as the rule lives.
func TestCopyKindNeedsItsGrant(t *testing.T) {
	ctx := context.Background()
	src, dst := namespace(t, "team-lp-np-src"), namespace(t, "team-lp-np-dst")
	env.Create(t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}})
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "policies"}}
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Names: []string{"deny"}, Namespaces: []string{dst}}
	env.Create(t, r)

	testenv.Eventually(t, wait, "the rule to say it may not read NetworkPolicies", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		c := r.GetCondition(xpv2.TypeSynced)
		if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "may not read or write networkpolicies.networking.k8s.io") || !strings.Contains(c.Message, "cluster/rbac/copy-kinds.yaml") {
			return false, fmt.Errorf("synced: %s %s", c.Status, c.Message)
		}
		return true, nil
	})
	// A poll's worth of retries would show by now: a reconcile that failed
	// is retried within seconds.
	time.Sleep(5 * time.Second)
	if r := forbidden.all(); len(r) > 0 {
		t.Errorf("the API server refused %d requests of the provider, want none: %v", len(r), r)
	}

	objs, err := testenv.ReadObjects(filepath.Join(testenv.RepoRoot(), grantFile))
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, o := range objs {
		if o.GetName() != "provider-clusterops:copy-networkpolicies" {
			continue
		}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("admin"), client.ForceOwnership); err != nil {
			t.Fatalf("cannot apply %s %q from %s: %v", o.GetKind(), o.GetName(), grantFile, err)
		}
		applied++
	}
	if applied != 2 {
		t.Fatalf("%s: want a ClusterRole and a ClusterRoleBinding named provider-clusterops:copy-networkpolicies, found %d objects", grantFile, applied)
	}
	cp := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: "deny"}}
	present(t, cp, true, "the NetworkPolicy copy, once granted")
	deleteAndWait(t, r)
	present(t, cp, false, "the NetworkPolicy copy to be pruned")
}

// TestCopyKindsGrants: every ClusterRole of the grant file is bound to the
// provider's service account alone, grants only what a CopyRule does, with
// no wildcard, and nothing the provider's own RBAC already grants.
func TestCopyKindsGrants(t *testing.T) {
	objs, err := testenv.ReadObjects(filepath.Join(testenv.RepoRoot(), grantFile))
	if err != nil {
		t.Fatal(err)
	}
	own := grantedBy(t, filepath.Join("cluster", "rbac", "provider-rbac.yaml"))
	allowed := []string{"get", "list", "watch", "create", "update", "delete", "escalate", "bind"}
	roles, bound := map[string]bool{}, map[string]bool{}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, r); err != nil {
				t.Fatal(err)
			}
			roles[r.Name] = true
			for _, rule := range r.Rules {
				for _, s := range slices.Concat(rule.APIGroups, rule.Resources, rule.Verbs) {
					if strings.Contains(s, "*") {
						t.Errorf("%s: rule %+v has wildcard %q", r.Name, rule, s)
					}
				}
				for _, v := range rule.Verbs {
					if !slices.Contains(allowed, v) {
						t.Errorf("%s: verb %q is more than a CopyRule does", r.Name, v)
					}
				}
				for _, g := range rule.APIGroups {
					for _, res := range rule.Resources {
						if own[g+"/"+res] {
							t.Errorf("%s: %s/%s is granted by provider-rbac.yaml already", r.Name, g, res)
						}
					}
				}
			}
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, b); err != nil {
				t.Fatal(err)
			}
			want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: saName, Namespace: saNamespace}}
			if b.RoleRef.Name != b.Name || !slices.Equal(want, b.Subjects) {
				t.Errorf("binding %s: roleRef %s, subjects %v; want its own role, bound to %v", b.Name, b.RoleRef.Name, b.Subjects, want)
			}
			bound[b.RoleRef.Name] = true
		default:
			t.Errorf("%s: unexpected kind %s", grantFile, o.GetKind())
		}
	}
	if len(roles) == 0 || !maps.Equal(roles, bound) {
		t.Errorf("roles %v, bound %v: want every role bound", roles, bound)
	}
}
