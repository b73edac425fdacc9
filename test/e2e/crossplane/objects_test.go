//go:build e2e

package crossplane

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

const timeout = 2 * time.Minute

// apply server-side applies every object of a file under the repository root, after mutate (which
// may be nil) has adjusted it, and returns the objects.
func apply(t *testing.T, file string, mutate func(u *unstructured.Unstructured)) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testenv.ReadObjects(filepath.Join(s.root, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if mutate != nil {
			mutate(u)
		}
		if err := s.c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("e2e"), client.ForceOwnership); err != nil {
			t.Fatalf("cannot apply %s %q from %s: %v", u.GetKind(), u.GetName(), file, err)
		}
	}
	return objs
}

// get reads an object by kind and key into a fresh Unstructured.
func get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, s.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)
}

// condition returns the status and message of a condition of u.
func condition(u *unstructured.Unstructured, typ string) (string, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			msg, _ := m["message"].(string)
			status, _ := m["status"].(string)
			return status, msg
		}
	}
	return "", ""
}

// eventually polls cond until it holds, failing the test with the last thing it observed.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	eventuallyWithin(t, timeout, what, cond)
}

// eventuallyWithin is eventually with a timeout of its own.
func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	began := time.Now()
	var last string
	err := waitFor(context.Background(), d, what, func(ctx context.Context) (bool, error) {
		ok, observed, err := cond(ctx)
		if err != nil {
			observed = err.Error()
		}
		last = observed
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("%v; last observed: %s", err, last)
	}
	t.Logf("%s after %s", what, time.Since(began).Round(time.Millisecond))
}

// waitTrue waits until each named condition of the object is True.
func waitTrue(t *testing.T, gvk schema.GroupVersionKind, ns, name string, types ...string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	eventually(t, fmt.Sprintf("%s %s/%s %v", gvk.Kind, ns, name, types), func(ctx context.Context) (bool, string, error) {
		var err error
		if u, err = get(ctx, gvk, ns, name); err != nil {
			return false, "", err
		}
		observed := ""
		for _, typ := range types {
			status, msg := condition(u, typ)
			observed += fmt.Sprintf("%s=%s %q; ", typ, status, msg)
			if status != "True" {
				return false, observed, nil
			}
		}
		return true, observed, nil
	})
	return u
}

// waitGone waits until the object no longer exists.
func waitGone(t *testing.T, gvk schema.GroupVersionKind, ns, name string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s %s/%s gone", gvk.Kind, ns, name), func(ctx context.Context) (bool, string, error) {
		u, err := get(ctx, gvk, ns, name)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, fmt.Sprintf("still there, deletionTimestamp=%v finalizers=%v", u.GetDeletionTimestamp(), u.GetFinalizers()), err
	})
}

// del deletes an object by kind and key, ignoring one that is already gone.
func del(t *testing.T, gvk schema.GroupVersionKind, ns, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := s.c.Delete(context.Background(), u); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
