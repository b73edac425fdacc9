package function

import (
	"fmt"

	"github.com/crossplane/function-sdk-go/resource/composite"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// An xrInput is what a composer needs to know about the observed XR.
type xrInput struct {
	xr   *composite.Unstructured
	kind string

	// namespace receives the composed namespaced resources: the namespaced
	// XR's own, or the namespace of the claim of a legacy XR.
	namespace string

	// baseName is what composed resources are named after: the namespaced
	// XR's name, or the name of the claim of a legacy XR. Both are unique per
	// kind within the namespace, and stable: a legacy XR's own name has a
	// random suffix users never typed.
	baseName string

	// claimed is true for a legacy XR composed through a claim.
	claimed bool
}

// readXR finds where and under which name the XR's resources are composed.
func readXR(xr *composite.Unstructured) (*xrInput, error) {
	in := &xrInput{xr: xr, kind: xr.GetKind()}
	if ns := xr.GetNamespace(); ns != "" {
		in.namespace, in.baseName = ns, xr.GetName()
		return in, nil
	}
	ref := xr.GetClaimReference()
	if ref == nil || ref.Namespace == "" {
		return nil, errors.Errorf("compose this XR through a claim or as a namespaced XR: %s %q is cluster-scoped and has no spec.claimRef.namespace, so it has no namespace to compose into", in.kind, xr.GetName())
	}
	if ref.Name == "" {
		return nil, errors.Errorf("%s %q: spec.claimRef.name is required", in.kind, xr.GetName())
	}
	in.namespace, in.baseName, in.claimed = ref.Namespace, ref.Name, true
	return in, nil
}

// displayName names the XR as its author knows it: a claim, or a namespaced XR.
func (in *xrInput) displayName() string {
	if in.claimed {
		return fmt.Sprintf("%s/%s (claim of %s)", in.namespace, in.baseName, in.xr.GetName())
	}
	return in.namespace + "/" + in.baseName
}

// decodeSpec reads the XR's spec into into. Fields Crossplane adds to the spec
// (claimRef, compositionRef, crossplane, ...) are ignored.
func (in *xrInput) decodeSpec(into any) error {
	if _, err := in.xr.GetValue("spec"); err != nil {
		return required("spec")
	}
	return errors.Wrap(in.xr.GetValueInto("spec", into), "cannot read spec")
}
