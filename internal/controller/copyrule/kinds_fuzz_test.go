package copyrule

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kindName is a kind's name as admission allows it.
var kindName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// FuzzCopyAnyKind: whatever an object of another kind holds, its copy holds
// none of its metadata, status or dropped fields, is written as its kind,
// and read back is in sync with its template.
func FuzzCopyAnyKind(f *testing.F) {
	f.Add(`{"spec":{"podSelector":{}},"status":{"x":1}}`, "NetworkPolicy", "networking.k8s.io")
	f.Add(`{"secrets":[{"name":"t"}],"imagePullSecrets":[{"name":"r"}]}`, "ServiceAccount", "")
	f.Add(`{"roleRef":{"name":"view"},"subjects":[],"metadata":{"labels":{"a":"b"}}}`, "RoleBinding", "rbac.authorization.k8s.io")
	f.Add(`{"data":"not a map","n":1.5,"big":9007199254740993}`, "Widget", "example.com")
	f.Fuzz(func(t *testing.T, content, kind, group string) {
		var u map[string]any
		if json.Unmarshal([]byte(content), &u) != nil || u == nil {
			return
		}
		if _, ok := u["metadata"].(map[string]any); !ok {
			delete(u, "metadata")
		}
		// Admission lets only names through: a kind of letters and digits, a
		// group without '/'.
		if !kindName.MatchString(kind) || strings.Contains(group, "/") {
			return
		}
		k := Mapping{GroupVersionKind: schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}}
		if k.typed() {
			return
		}
		u["apiVersion"], u["kind"] = k.GroupVersion().String(), kind
		src := fromUnstructured(&unstructured.Unstructured{Object: u})
		src.Namespace, src.Name = "platform", "src"
		for f := range src.Body {
			switch f {
			case "apiVersion", "kind", "metadata", "status":
				t.Fatalf("the body holds %q", f)
			}
			for _, d := range droppedFields[k.GroupKind()] {
				if f == d {
					t.Fatalf("the body holds dropped field %q", f)
				}
			}
		}
		d, err := Transform{}.Apply(src)
		if err != nil {
			t.Fatal(err)
		}
		owner := Owner{UID: "uid-1", Namespace: "platform", Name: "rule"}
		h := Hash(d)
		c, ok := Desired(owner, d, h, "team-a", nil, false).ToAPI(k).(*unstructured.Unstructured)
		if !ok || c.GroupVersionKind() != k.GroupVersionKind {
			t.Fatalf("the copy is not a %s", k)
		}
		// As the API server would serve it back: through JSON.
		b, err := json.Marshal(c.Object)
		if err != nil {
			t.Fatal(err)
		}
		back := &unstructured.Unstructured{}
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		if got := fromUnstructured(back); !InSync(owner, d, h, got) {
			t.Fatalf("the copy read back is not in sync: %s", b)
		}
	})
}
