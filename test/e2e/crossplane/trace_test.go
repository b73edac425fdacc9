//go:build e2e

package crossplane

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A traceNode is one resource of `crossplane beta trace -o json`: the object and what it composes.
type traceNode struct {
	Object   unstructured.Unstructured `json:"object"`
	Children []*traceNode              `json:"children"`
}

// trace runs `crossplane beta trace <resource> -n <ns> -o json`, as a user debugging a claim
// would, and returns the tree.
func trace(t *testing.T, resource, ns string) *traceNode {
	t.Helper()
	cmd := exec.Command(s.crank, "beta", "trace", resource, "-n", ns, "-o", "json")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok { //nolint:errorlint // Output returns it unwrapped.
			stderr = string(ee.Stderr)
		}
		t.Fatalf("crossplane beta trace %s -n %s: %v\n%s", resource, ns, err, stderr)
	}
	n := &traceNode{}
	if err := json.Unmarshal(out, n); err != nil {
		t.Fatalf("crossplane beta trace %s -n %s: not a resource tree: %v\n%s", resource, ns, err, out)
	}
	return n
}

// paths lists a trace tree as "Kind/name" paths from its root, each with the Ready and Synced
// status of its resource where it has them: "WebApp/hello > XWebApp/hello-x > AppBundle/hello Ready=True Synced=True".
func (n *traceNode) paths() []string {
	var out []string
	var walk func(prefix string, n *traceNode)
	walk = func(prefix string, n *traceNode) {
		p := n.Object.GetKind() + "/" + n.Object.GetName()
		if prefix != "" {
			p = prefix + " > " + p
		}
		line := p
		for _, c := range []string{"Ready", "Synced"} {
			if st, _ := condition(&n.Object, c); st != "" {
				line += fmt.Sprintf(" %s=%s", c, st)
			}
		}
		out = append(out, line)
		for _, c := range n.Children {
			walk(p, c)
		}
	}
	walk("", n)
	slices.Sort(out)
	return out
}

// checkTrace fails the test unless the trace of resource holds each wanted line (see paths), the
// composite's name standing in for "*".
func checkTrace(t *testing.T, resource, ns string, want []string) {
	t.Helper()
	got := trace(t, resource, ns).paths()
	for _, w := range want {
		found := slices.ContainsFunc(got, func(g string) bool { return globMatch(w, g) })
		if !found {
			t.Errorf("crossplane beta trace %s -n %s: no %q in the tree:\n%s", resource, ns, w, strings.Join(got, "\n"))
		}
	}
}

// globMatch matches s against a pattern whose "*" stands for any run of characters but " ".
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for i, p := range parts[1:] {
		last := i == len(parts)-2
		j := strings.Index(s, p)
		if last {
			j = strings.LastIndex(s, p)
		}
		if j < 0 || strings.Contains(s[:j], " ") {
			return false
		}
		s = s[j+len(p):]
	}
	return s == ""
}
