package apimetrics

import (
	"net/http"
	"testing"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		method, path, watch string
		verb, resource      string
	}{
		{http.MethodGet, "/api/v1/namespaces/a/configmaps/x", "", "get", "configmaps"},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps", "", "list", "configmaps"},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps", "true", "watch", "configmaps"},
		{http.MethodGet, "/api/v1/configmaps", "1", "watch", "configmaps"},
		{http.MethodGet, "/api/v1/namespaces", "", "list", "namespaces"},
		{http.MethodGet, "/api/v1/namespaces/a", "", "get", "namespaces"},
		{http.MethodPut, "/apis/workload.clusterops.io/v1alpha1/namespaces/a/configrollouts/r/status", "", "update", "configrollouts/status"},
		{http.MethodPatch, "/apis/apps/v1/namespaces/a/deployments/web", "", "patch", "deployments"},
		{http.MethodPost, "/api/v1/namespaces/a/pods", "", "create", "pods"},
		{http.MethodPost, "/api/v1/namespaces/a/pods/p/eviction", "", "create", "pods/eviction"},
		{http.MethodDelete, "/api/v1/namespaces/a/pods/p", "", "delete", "pods"},
		{http.MethodDelete, "/api/v1/namespaces/a/pods", "", "deletecollection", "pods"},
		{http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/s/leases/l", "", "get", "leases"},
		{http.MethodGet, "/apis", "", "get", "-"},
		{http.MethodGet, "/api/v1", "", "get", "-"},
		{http.MethodGet, "/healthz", "", "get", "-"},
	}
	for _, c := range cases {
		verb, res := Classify(c.method, c.path, c.watch)
		if verb != c.verb || res != c.resource {
			t.Errorf("Classify(%s %s watch=%q) = %s %s, want %s %s", c.method, c.path, c.watch, verb, res, c.verb, c.resource)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("GET", "/api/v1/namespaces/a/configmaps/x", "")
	f.Add("PATCH", "/apis/apps/v1/namespaces/a/deployments/web/status", "true")
	f.Fuzz(func(t *testing.T, method, path, watch string) {
		verb, res := Classify(method, path, watch)
		if verb == "" && method != "" || res == "" {
			t.Fatalf("Classify(%q, %q, %q) = %q, %q", method, path, watch, verb, res)
		}
	})
}
