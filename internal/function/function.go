// Package function is function-clusterops, the Crossplane composition function
// behind the platform APIs built on this provider's managed resources: a
// Tenant (registry pull secret and shared config copied into the tenant's
// namespace, optional chaos confined to it) and a WebApp (an AppBundle, a
// ConfigMap it reads, and a ConfigRollout that rolls it when the ConfigMap
// changes).
package function

import (
	"context"
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
)

// Kinds of composite resource this function composes: the legacy
// cluster-scoped XRs (composed through their claims, Tenant and WebApp) and
// the namespaced XRs of Crossplane v2.
const (
	KindXTenant = "XTenant"
	KindTenant  = "Tenant"
	KindXWebApp = "XWebApp"
	KindWebApp  = "WebApp"
)

// A composer turns an XR into desired composed resources. It returns a
// fieldError for bad input, so the Fatal result names the field.
type composer func(xr *xrInput, observed map[resource.Name]resource.ObservedComposed) (*composition, error)

// A composition is what a composer wants: composed resources by their
// resource name in the pipeline, and the XR status fields it surfaces.
type composition struct {
	resources map[resource.Name]*resource.DesiredComposed
	status    map[string]any
}

// add converts o into a desired composed resource named name.
func (c *composition) add(name resource.Name, o runtime.Object, gvk schema.GroupVersionKind, ready resource.Ready) error {
	d, err := desiredFrom(o, gvk, ready)
	if err != nil {
		return err
	}
	c.resources[name] = d
	return nil
}

// Function composes the platform APIs.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	log logging.Logger
}

// New returns the function, logging to log.
func New(log logging.Logger) *Function {
	return &Function{log: log}
}

// RunFunction composes the observed XR into this step's desired state, on top
// of what earlier pipeline steps desired.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)

	oxr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the observed composite resource"))
		return rsp, nil
	}
	log := f.log.WithValues("xr-kind", oxr.Resource.GetKind(), "xr-name", oxr.Resource.GetName(), "tag", req.GetMeta().GetTag())

	var compose composer
	switch k := oxr.Resource.GetKind(); k {
	case KindXTenant, KindTenant:
		compose = composeTenant
	case KindXWebApp, KindWebApp:
		compose = composeWebApp
	default:
		response.Fatal(rsp, errors.Errorf("function-clusterops composes %s, %s, %s and %s resources, not %q: point this Composition at another function", KindXTenant, KindTenant, KindXWebApp, KindWebApp, k))
		return rsp, nil
	}

	xr, err := readXR(oxr.Resource)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the observed composed resources"))
		return rsp, nil
	}
	c, err := compose(xr, observed)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("invalid %s %q: %w", xr.kind, xr.displayName(), err))
		return rsp, nil
	}

	if err := setDesired(req, rsp, oxr, c); err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	log.Debug("Composed", "namespace", xr.namespace, "resources", len(c.resources))
	return rsp, nil
}

// setDesired adds c to the desired state accumulated by earlier steps.
func setDesired(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, oxr *resource.Composite, c *composition) error {
	// The response starts from the request's desired state, so this adds to
	// what earlier steps desired rather than replacing it.
	if err := response.SetDesiredComposedResources(rsp, c.resources); err != nil {
		return errors.Wrap(err, "cannot set the desired composed resources")
	}
	if len(c.status) == 0 {
		return nil
	}
	dxr, err := request.GetDesiredCompositeResource(req)
	if err != nil {
		return errors.Wrap(err, "cannot read the desired composite resource")
	}
	dxr.Resource.SetAPIVersion(oxr.Resource.GetAPIVersion())
	dxr.Resource.SetKind(oxr.Resource.GetKind())
	for k, v := range c.status {
		if err := dxr.Resource.SetValue("status."+k, v); err != nil {
			return errors.Wrapf(err, "cannot set status.%s of the composite resource", k)
		}
	}
	return errors.Wrap(response.SetDesiredCompositeResource(rsp, dxr), "cannot set the desired composite resource")
}
