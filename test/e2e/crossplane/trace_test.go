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
	"time"

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
// composite's name standing in for "*", within 30 s: a claim's conditions follow its composite's a
// moment later, and once in CI a claim already seen Ready showed Ready=False under a Ready
// composite (a composed resource's Ready turning False for a moment, such as an AppBundle whose
// Deployment is rolling out new pods: in that run the composed ConfigRollout had just rolled it,
// as it then did every Deployment it started to follow), as a user tracing it then would see.
func checkTrace(t *testing.T, resource, ns string, want []string) {
	t.Helper()
	var got []string
	missing := want
	for deadline := time.Now().Add(30 * time.Second); len(missing) > 0 && time.Now().Before(deadline); time.Sleep(time.Second) {
		got = trace(t, resource, ns).paths()
		missing = slices.DeleteFunc(slices.Clone(want), func(w string) bool {
			return slices.ContainsFunc(got, func(g string) bool { return globMatch(w, g) })
		})
	}
	for _, w := range missing {
		t.Errorf("crossplane beta trace %s -n %s: no %q in the tree within 30 s:\n%s", resource, ns, w, strings.Join(got, "\n"))
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
