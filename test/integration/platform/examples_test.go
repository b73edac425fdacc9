package platform

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// Groups of the platform APIs: legacy XRs and their claims, and namespaced XRs.
const (
	legacyGroup     = "platform.clusterops.io"
	namespacedGroup = "namespaced.platform.clusterops.io"
)

// An example is one object of a file under examples/platform.
type example struct {
	file string
	obj  *unstructured.Unstructured
}

// The platform, set up once for all tests: every example applied, and the
// CRDs Crossplane would generate from the XRDs installed.
var (
	setupOnce sync.Once
	setupErr  error
	platform  struct {
		// instances are the example claims and namespaced XRs.
		instances []example
		// xrds are the XRDs, by the kind of their claim (legacy) or XR
		// (namespaced).
		xrds map[string]*xpv1.CompositeResourceDefinition
	}
)

// setup applies every file under examples/platform, as `kubectl apply
// --server-side -f` would, in two passes: everything but the claims and XRs,
// then, once the CRDs Crossplane generates from the XRDs are installed, the
// claims and XRs.
func setup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() { setupErr = doSetup(context.Background()) })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

func doSetup(ctx context.Context) error {
	root := filepath.Join(testenv.RepoRoot(), "examples", "platform")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(files)

	platform.xrds = map[string]*xpv1.CompositeResourceDefinition{}
	var crds []*extv1.CustomResourceDefinition
	for _, f := range files {
		objs, err := testenv.ReadObjects(f)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, f)
		for _, o := range objs {
			if g := o.GroupVersionKind().Group; g == legacyGroup || g == namespacedGroup {
				platform.instances = append(platform.instances, example{file: rel, obj: o})
				continue
			}
			if err := apply(ctx, o); err != nil {
				return errorf("%s: %v", rel, err)
			}
			if o.GetKind() != "CompositeResourceDefinition" {
				continue
			}
			xrd, generated, err := generateCRDs(o)
			if err != nil {
				return errorf("%s: %v", rel, err)
			}
			kind := xrd.Spec.Names.Kind
			if xrd.Spec.ClaimNames != nil {
				kind = xrd.Spec.ClaimNames.Kind
			}
			platform.xrds[xrd.Spec.Group+"/"+kind] = xrd
			crds = append(crds, generated...)
		}
	}
	for _, crd := range crds {
		if err := env.Client.Create(ctx, crd); err != nil {
			return errorf("cannot install the CRD Crossplane generates for %s: %v", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		if err := established(ctx, crd.GetName()); err != nil {
			return err
		}
	}
	for _, e := range platform.instances {
		if err := apply(ctx, e.obj.DeepCopy()); err != nil {
			return errorf("%s: %v", e.file, err)
		}
	}
	return nil
}

// generateCRDs returns the CRDs Crossplane generates from an XRD, with
// Crossplane's own generator: the XR's and, for a legacy XRD, the claim's.
// A v2 XRD has the v1 fields (less claims), so it decodes into the v1 type.
func generateCRDs(u *unstructured.Unstructured) (*xpv1.CompositeResourceDefinition, []*extv1.CustomResourceDefinition, error) {
	b, err := u.MarshalJSON()
	if err != nil {
		return nil, nil, err
	}
	xrd := &xpv1.CompositeResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, xrd); err != nil {
		return nil, nil, errorf("not an XRD: %v", err)
	}
	if xrd.Spec.Scope == nil {
		return nil, nil, errorf("set spec.scope explicitly: its default differs between apiextensions.crossplane.io/v1 and v2")
	}
	xr, err := xcrd.ForCompositeResource(xrd)
	if err != nil {
		return nil, nil, err
	}
	crds := []*extv1.CustomResourceDefinition{xr}
	if xrd.Spec.ClaimNames != nil {
		claim, err := xcrd.ForCompositeResourceClaim(xrd)
		if err != nil {
			return nil, nil, err
		}
		crds = append(crds, claim)
	}
	for _, crd := range crds {
		// Owned by an XRD in the real world; here nothing would collect them.
		crd.SetOwnerReferences(nil)
	}
	return xrd, crds, nil
}

func established(ctx context.Context, name string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		crd := &extv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err == nil && xcrd.IsEstablished(crd.Status) {
			return nil
		}
		if time.Now().After(deadline) {
			return errorf("CRD %s never became established", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func apply(ctx context.Context, o *unstructured.Unstructured) error {
	return env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("examples"), client.ForceOwnership)
}

// TestPlatformExamplesApplyAsValidInstances: every file under examples/platform applies, the XRDs
// generate valid CRDs, and the claims and XRs are valid instances of them.
func TestPlatformExamplesApplyAsValidInstances(t *testing.T) {
	setup(t)
	var got []string
	for _, e := range platform.instances {
		got = append(got, e.file+": "+e.obj.GetKind())
	}
	want := []string{
		"legacy/tenant-claim.yaml: Tenant",
		"legacy/webapp-claim.yaml: WebApp",
		"namespaced/tenant.yaml: Tenant",
		"namespaced/webapp.yaml: WebApp",
	}
	if !slices.Equal(want, got) {
		t.Errorf("example claims and XRs: got %v, want %v", got, want)
	}
}

// TestLegacyAndNamespacedSchemasMatch: the legacy and namespaced XRDs of a
// platform API offer the same schema.
func TestLegacyAndNamespacedSchemasMatch(t *testing.T) {
	setup(t)
	for _, kind := range []string{"Tenant", "WebApp"} {
		legacy, namespaced := platform.xrds[legacyGroup+"/"+kind], platform.xrds[namespacedGroup+"/"+kind]
		if legacy == nil || namespaced == nil {
			t.Fatalf("%s: want a legacy and a namespaced XRD", kind)
		}
		l, n := legacy.Spec.Versions[0], namespaced.Spec.Versions[0]
		if string(l.Schema.OpenAPIV3Schema.Raw) != string(n.Schema.OpenAPIV3Schema.Raw) {
			t.Errorf("%s: the legacy and namespaced XRDs' schemas differ:\nlegacy:     %s\nnamespaced: %s", kind, l.Schema.OpenAPIV3Schema.Raw, n.Schema.OpenAPIV3Schema.Raw)
		}
		if !slices.Equal(l.AdditionalPrinterColumns, n.AdditionalPrinterColumns) {
			t.Errorf("%s: the legacy and namespaced XRDs' printer columns differ", kind)
		}
	}
}

// TestGeneratedSchemasRefuseWhatTheFunctionRefuses: the generated CRDs refuse what function-clusterops would
// refuse, at admission, with a message that says why.
func TestGeneratedSchemasRefuseWhatTheFunctionRefuses(t *testing.T) {
	setup(t)
	cases := map[string]struct {
		reason string
		obj    string
		want   string
	}{
		"TenantWithoutPullSecret": {
			reason: "Every tenant gets the pull secret.",
			obj:    "{apiVersion: namespaced.platform.clusterops.io/v1alpha1, kind: Tenant, metadata: {name: bad, namespace: tenant-beta}, spec: {}}",
			want:   "spec.pullSecret: Required value",
		},
		"TenantOtherProviderConfig": {
			reason: "A claim cannot pick a config that reaches further than the one the platform team pinned.",
			obj:    "{apiVersion: platform.clusterops.io/v1alpha1, kind: Tenant, metadata: {name: bad, namespace: tenant-alpha}, spec: {providerConfigName: default, pullSecret: {namespace: platform-shared, name: registry-pull}}}",
			want:   `spec.providerConfigName: Unsupported value: "default"`,
		},
		"TenantSharedConfigPicksNothing": {
			reason: "Shared config needs names or a selector.",
			obj:    "{apiVersion: namespaced.platform.clusterops.io/v1alpha1, kind: Tenant, metadata: {name: bad, namespace: tenant-beta}, spec: {pullSecret: {namespace: platform-shared, name: registry-pull}, sharedConfig: {namespace: platform-shared, selector: {}}}}",
			want:   "set names or a non-empty selector",
		},
		"TenantChaosWithoutMode": {
			reason: "Enabled chaos needs a mode.",
			obj:    "{apiVersion: platform.clusterops.io/v1alpha1, kind: Tenant, metadata: {name: bad, namespace: tenant-alpha}, spec: {pullSecret: {namespace: platform-shared, name: registry-pull}, chaos: {enabled: true}}}",
			want:   "enabled chaos needs tantrumMode, cancerMode or ipsumMode",
		},
		"TenantChaosInterval": {
			reason: "Rounds are at least a second apart.",
			obj:    "{apiVersion: namespaced.platform.clusterops.io/v1alpha1, kind: Tenant, metadata: {name: bad, namespace: tenant-beta}, spec: {pullSecret: {namespace: platform-shared, name: registry-pull}, chaos: {enabled: true, ipsumMode: true, interval: 10ms}}}",
			want:   "interval must be at least 1s",
		},
		"WebAppServiceWithoutPort": {
			reason: "A Service needs a port.",
			obj:    "{apiVersion: platform.clusterops.io/v1alpha1, kind: WebApp, metadata: {name: bad, namespace: tenant-alpha}, spec: {image: nginx, service: ClusterIP}}",
			want:   "a service needs spec.port",
		},
		"WebAppConfigKey": {
			reason: "Config keys become environment variable names.",
			obj:    "{apiVersion: namespaced.platform.clusterops.io/v1alpha1, kind: WebApp, metadata: {name: bad, namespace: tenant-beta}, spec: {image: nginx, config: {log.level: debug}}}",
			want:   "config keys are environment variable names",
		},
		"WebAppImageWithSpace": {
			reason: "An image reference has no spaces.",
			obj:    "{apiVersion: namespaced.platform.clusterops.io/v1alpha1, kind: WebApp, metadata: {name: bad, namespace: tenant-beta}, spec: {image: 'nginx 1.27'}}",
			want:   "spec.image in body should match",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tc.obj), &u.Object); err != nil {
				t.Fatal(err)
			}
			err := env.Client.Create(context.Background(), u, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("\n%s\ncreate: got error %v, want one containing %q", tc.reason, err, tc.want)
			}
		})
	}
}

// fromServer reads o back from the API server, with its defaults.
func fromServer(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(o.GroupVersionKind())
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), got)
	return got, err
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
