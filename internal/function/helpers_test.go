package function

import (
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"
)

// A state is a pipeline state written as YAML: the composite and the
// composed resources by name. Composed resources may carry a ready: field
// (True or False), which is the Ready of the protobuf resource, not a field
// of the object.
type state struct {
	xr        string
	resources map[string]string
}

// req builds a RunFunctionRequest as Crossplane sends it.
func req(t *testing.T, observed, desired state) *fnv1.RunFunctionRequest {
	t.Helper()
	return &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "tag"},
		Observed: toState(t, observed),
		Desired:  toState(t, desired),
	}
}

func toState(t *testing.T, s state) *fnv1.State {
	t.Helper()
	if s.xr == "" && len(s.resources) == 0 {
		return nil
	}
	out := &fnv1.State{}
	if s.xr != "" {
		out.Composite = &fnv1.Resource{Resource: toStruct(t, s.xr)}
	}
	for name, y := range s.resources {
		if out.Resources == nil {
			out.Resources = map[string]*fnv1.Resource{}
		}
		out.Resources[name] = &fnv1.Resource{Resource: toStruct(t, y)}
	}
	return out
}

func toStruct(t *testing.T, y string) *structpb.Struct {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("bad YAML fixture: %v\n%s", err, y)
	}
	return resource.MustStructJSON(string(j))
}

// A composed resource as a test sees it: the object and whether the function
// said it is ready.
type composedView struct {
	Ready  string
	Object map[string]any
}

// view reads the desired composed resources of a response.
func view(rsp *fnv1.RunFunctionResponse) map[string]composedView {
	out := map[string]composedView{}
	for name, r := range rsp.GetDesired().GetResources() {
		out[name] = composedView{Ready: readyString(r.GetReady()), Object: r.GetResource().AsMap()}
	}
	return out
}

// want parses the expected composed resources, written as YAML.
func want(t *testing.T, ready map[string]string, objects map[string]string) map[string]composedView {
	t.Helper()
	out := map[string]composedView{}
	for name, y := range objects {
		out[name] = composedView{Ready: ready[name], Object: toStruct(t, y).AsMap()}
	}
	return out
}

func readyString(r fnv1.Ready) string {
	switch r {
	case fnv1.Ready_READY_TRUE:
		return "True"
	case fnv1.Ready_READY_FALSE:
		return "False"
	case fnv1.Ready_READY_UNSPECIFIED:
		return "Unspecified"
	}
	return r.String()
}

// A result as a test sees it.
type resultView struct {
	Severity string
	Message  string
}

func results(rsp *fnv1.RunFunctionResponse) []resultView {
	var out []resultView
	for _, r := range rsp.GetResults() {
		out = append(out, resultView{Severity: r.GetSeverity().String(), Message: r.GetMessage()})
	}
	return out
}

// desiredStatus is the XR status the response asks for, if any.
func desiredStatus(rsp *fnv1.RunFunctionResponse) map[string]any {
	st, _ := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(map[string]any)
	return st
}
