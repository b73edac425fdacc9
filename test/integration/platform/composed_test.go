package platform

import (
	"context"
	"slices"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"

	"github.com/clusterops/provider-clusterops/internal/function"
)

// TestComposedResourcesValid feeds every example claim and XR, as Crossplane
// would send it, through function-clusterops, and applies what it composes
// (server-side, dry run, as Crossplane applies it) against the provider's
// CRDs and the API server's own types: a field renamed on either side, or a
// value the CRDs' validation refuses, fails here rather than in a cluster.
func TestComposedResourcesValid(t *testing.T) {
	setup(t)
	ctx := context.Background()

	want := map[string][]string{
		"legacy/tenant-claim.yaml": {"copy-pull-secret", "copy-shared-config"},
		"legacy/webapp-claim.yaml": {"app", "config", "rollout"},
		"namespaced/tenant.yaml":   {"chaos", "copy-pull-secret", "copy-shared-config"},
		"namespaced/webapp.yaml":   {"app", "config", "rollout"},
	}
	for _, e := range platform.instances {
		t.Run(e.file, func(t *testing.T) {
			xr, err := fromServer(ctx, e.obj)
			if err != nil {
				t.Fatal(err)
			}
			if e.obj.GroupVersionKind().Group == legacyGroup {
				if xr, err = compositeOf(ctx, xr); err != nil {
					t.Fatal(err)
				}
			}
			s, err := structpb.NewStruct(xr.Object)
			if err != nil {
				t.Fatal(err)
			}
			rsp, err := function.New(logging.NewNopLogger()).RunFunction(ctx, &fnv1.RunFunctionRequest{
				Meta:     &fnv1.RequestMeta{Tag: e.file},
				Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: s}},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rsp.GetResults() {
				t.Errorf("result %s: %s", r.GetSeverity(), r.GetMessage())
			}

			var names []string
			for name, r := range rsp.GetDesired().GetResources() {
				names = append(names, name)
				u := &unstructured.Unstructured{Object: r.GetResource().AsMap()}
				// As Crossplane applies it: server-side apply, which refuses
				// fields the schema does not declare.
				if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.ForceOwnership, client.FieldOwner("apiextensions.crossplane.io/composed/test")); err != nil {
					t.Errorf("composed resource %s (%s %s/%s) is refused: %v", name, u.GetKind(), u.GetNamespace(), u.GetName(), err)
				}
			}
			slices.Sort(names)
			if diff := cmp.Diff(want[e.file], names); diff != "" {
				t.Errorf("composed resources: -want, +got:\n%s", diff)
			}
		})
	}
}

// compositeOf creates the legacy XR that Crossplane creates for a claim: the
// claim's spec (less claim-only fields) with spec.claimRef, a generated name
// and the claim labels. It returns it as the API server stored it, defaults
// included.
func compositeOf(ctx context.Context, claim *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	xrd := platform.xrds[claim.GroupVersionKind().Group+"/"+claim.GetKind()]
	spec, _, err := unstructured.NestedMap(claim.Object, "spec")
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"compositeDeletePolicy", "resourceRef", "writeConnectionSecretToRef"} {
		delete(spec, f)
	}
	spec["claimRef"] = map[string]any{
		"apiVersion": claim.GetAPIVersion(),
		"kind":       claim.GetKind(),
		"name":       claim.GetName(),
		"namespace":  claim.GetNamespace(),
	}
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": runtime.DeepCopyJSONValue(spec)}}
	xr.SetAPIVersion(claim.GetAPIVersion())
	xr.SetKind(xrd.Spec.Names.Kind)
	xr.SetName(claim.GetName() + "-x7k2p")
	xr.SetLabels(map[string]string{
		xcrd.LabelKeyClaimName:             claim.GetName(),
		xcrd.LabelKeyClaimNamespace:        claim.GetNamespace(),
		xcrd.LabelKeyNamePrefixForComposed: claim.GetName() + "-x7k2p",
	})
	if err := apply(ctx, xr); err != nil {
		return nil, err
	}
	return fromServer(ctx, xr)
}
