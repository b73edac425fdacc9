package copyrule

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// FuzzCopyContent feeds user data, labels and conflict policies: a copy the
// rule makes of a source is in sync with it and hashes like it; an object in
// the way with other data is taken over only by Overwrite, and then holds the
// source's data; and no reason a copy is left mentions the data.
func FuzzCopyContent(f *testing.F) {
	f.Add("password", "hunter2", "team", "a", "Skip", "other", false)
	f.Add("", "", "", "", "Adopt", "", true)
	f.Add("k", "v", LabelRuleUID, "forged", "Overwrite", "v2", true)
	f.Add("k", "v", "l", "x", "Merge", "v", false)
	f.Fuzz(func(t *testing.T, key, value, labelKey, labelValue, policy, otherValue string, secret bool) {
		owner := Owner{UID: "uid-1", Namespace: "apps", Name: "rule"}
		src := Object{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "src", Labels: map[string]string{labelKey: labelValue}}}
		other := Object{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "src"}}
		if secret {
			src.Bytes, src.Type = map[string][]byte{key: []byte(value)}, corev1.SecretTypeOpaque
			other.Bytes, other.Type = map[string][]byte{key: []byte(otherValue)}, corev1.SecretTypeOpaque
		} else {
			src.Data = map[string]string{key: value}
			other.Data = map[string]string{key: otherValue}
		}
		h := Hash(src)
		c := Desired(owner, src, h, "team-a", nil, false)
		if !InSync(owner, src, h, c) || Hash(c) != h || !SameData(src, c) || !OwnedBy(owner, c) {
			t.Fatalf("the copy %+v of %+v is not in sync with it", c, src)
		}
		if OwnedBy(owner, Released(c)) {
			t.Fatal("a released object still belongs to the rule")
		}

		a, why := Conflict(owner, v1alpha1.ConflictPolicy(policy), src, h, other)
		same := value == otherValue
		switch {
		case a.Op == "" && why == "":
			t.Fatalf("Conflict(%q) neither acts nor says why", policy)
		case a.Op != "" && policy != string(v1alpha1.ConflictOverwrite) && (policy != string(v1alpha1.ConflictAdopt) || !same):
			t.Fatalf("Conflict(%q) takes over an object with other data: %s", policy, a.Op)
		case a.Op != "" && !SameData(a.Object, src):
			t.Fatalf("Conflict(%q) writes data other than the source's", policy)
		}
		// The reason does not depend on the data (only on whether it is the
		// same), so no data can leak through it into status or events.
		src2, other2 := src, other
		if secret {
			src2.Bytes = map[string][]byte{key: []byte("a")}
			other2.Bytes = map[string][]byte{key: []byte(map[bool]string{true: "a", false: "b"}[same])}
		} else {
			src2.Data = map[string]string{key: "a"}
			other2.Data = map[string]string{key: map[bool]string{true: "a", false: "b"}[same]}
		}
		if _, why2 := Conflict(owner, v1alpha1.ConflictPolicy(policy), src2, Hash(src2), other2); why2 != why {
			t.Fatalf("the reason depends on the data: %q, %q", why, why2)
		}
	})
}
