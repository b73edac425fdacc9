package function

import (
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// desiredFrom turns a typed object into a desired composed resource of kind
// gvk. Composers build the provider's own Go types so that a renamed field
// fails to compile rather than to apply.
//
// The object goes through the API machinery's converter, which honours
// omitempty on numbers and booleans (a zero eagerness or maxParallelWrites
// would be rejected; leaving it out lets the API server default it), and then
// loses what the converter keeps but server-side apply would read as intent:
// status, null metadata, empty objects and lists.
func desiredFrom(o runtime.Object, gvk schema.GroupVersionKind, ready resource.Ready) (*resource.DesiredComposed, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot convert %s to unstructured", gvk.Kind)
	}
	delete(m, "status")
	prune(m)
	cd := &composed.Unstructured{Unstructured: unstructured.Unstructured{Object: m}}
	cd.SetGroupVersionKind(gvk)
	return &resource.DesiredComposed{Resource: cd, Ready: ready}, nil
}

// prune removes nil values, empty objects and empty lists, bottom up.
func prune(m map[string]any) {
	for k, v := range m {
		if empty(v) {
			delete(m, k)
		}
	}
}

func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		prune(t)
		return len(t) == 0
	case []any:
		for _, e := range t {
			if m, ok := e.(map[string]any); ok {
				prune(m)
			}
		}
		return len(t) == 0
	default:
		return false
	}
}

// mrReady says a composed managed resource is ready when the provider says
// so: its observed Ready condition is True.
func mrReady(observed map[resource.Name]resource.ObservedComposed, name resource.Name) resource.Ready {
	o, ok := observed[name]
	if !ok || o.Resource.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
		return resource.ReadyFalse
	}
	return resource.ReadyTrue
}

// existsReady says a composed plain Kubernetes object, which has no
// conditions, is ready once it exists.
func existsReady(observed map[resource.Name]resource.ObservedComposed, name resource.Name) resource.Ready {
	if _, ok := observed[name]; ok {
		return resource.ReadyTrue
	}
	return resource.ReadyFalse
}
