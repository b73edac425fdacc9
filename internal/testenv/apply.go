package testenv

import (
	"bytes"
	"context"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// ReadObjects decodes every document of a YAML file.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read %s", path)
	}
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, errors.Wrapf(err, "cannot decode %s", path)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// ApplyFile server-side applies every object of a YAML file, as
// `kubectl apply --server-side` would.
func ApplyFile(ctx context.Context, c client.Client, path string) ([]*unstructured.Unstructured, error) {
	objs, err := ReadObjects(path)
	if err != nil {
		return nil, err
	}
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("examples"), client.ForceOwnership); err != nil {
			return nil, errors.Wrapf(err, "cannot apply %s %q from %s", u.GetKind(), u.GetName(), path)
		}
	}
	return objs, nil
}
