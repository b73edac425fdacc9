package copyrule

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// FuzzTransform feeds a source (text and binary values, labels) and a rule's
// keys, copy name, into and metadata, and checks what a copy may hold: every
// key of the copy comes from exactly one key of the source, with its value
// byte for byte, and only keys the rule lets through; a ConfigMap's data is
// valid UTF-8; an error names no value; the labels hold no provider key,
// none that is dropped unless the rule adds it, and every one it adds; and
// the copy written from the template, read back from the API object, is in
// sync with it.
func FuzzTransform(f *testing.F) {
	f.Add("password", "hunter2", "host", []byte("db"), "a", byte(0), byte(0), "argocd.argoproj.io/instance", "app.kubernetes.io/", true, false)
	f.Add("a", "1", "b", []byte{0xff, 0x00}, "b", byte(0xff), byte(0x12), "team", "", false, true)
	f.Add("k", "v", "k2", []byte("v"), "k", byte(0x21), byte(0x42), LabelRuleUID, "copy.", true, true)
	f.Fuzz(func(t *testing.T, k1, v1, k2 string, v2 []byte, renameTo string, modes, more byte, labelKey, dropPrefix string, secret, into bool) {
		const marker = "\x00value-marker\x00"
		src := Object{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "src", Labels: map[string]string{labelKey: "x", "keep": "y"}}}
		if secret {
			src.Type = corev1.SecretTypeOpaque
			src.Bytes = map[string][]byte{k1: []byte(v1 + marker), k2: append(bytes.Clone(v2), marker...)}
		} else {
			src.Data = map[string]string{k1: v1 + marker}
			if k2 != k1 {
				src.Bytes = map[string][]byte{k2: append(bytes.Clone(v2), marker...)}
			}
		}
		p := v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Keys: &v1alpha1.CopyKeys{}, Metadata: &v1alpha1.CopyMetadata{}}
		if secret {
			p.Kind = v1alpha1.KindSecret
			if into {
				p.Into = v1alpha1.KindConfigMap
			}
		}
		keys := []string{k1, k2, renameTo}
		if modes&1 != 0 {
			p.Keys.Include = []string{keys[more%3]}
		}
		if modes&2 != 0 {
			p.Keys.Exclude = []string{keys[(more>>2)%3]}
		}
		if modes&4 != 0 {
			p.Keys.Rename = map[string]v1alpha1.DataKey{keys[(more>>4)%2]: v1alpha1.DataKey(renameTo)}
		}
		if modes&8 != 0 {
			p.Keys.Rename = map[string]v1alpha1.DataKey{k1: v1alpha1.DataKey(k2), k2: v1alpha1.DataKey(k1)}
		}
		if modes&16 != 0 {
			p.Metadata.DropLabels = []string{labelKey}
		}
		if modes&32 != 0 {
			p.Metadata.DropLabelPrefixes = []string{dropPrefix}
		}
		if modes&64 != 0 {
			p.Metadata.Labels = map[string]v1alpha1.LabelValue{labelKey: "added", "keep": "added"}
		}
		if modes&128 != 0 {
			p.Metadata.Annotations = map[string]v1alpha1.AnnotationValue{labelKey: "a", AnnotationHash: "forged"}
			p.CopyName = "renamed"
		}
		tr := NewTransform(p)

		d, err := tr.Apply(src)
		if d.Name != tr.Name(src) {
			t.Fatalf("the template is named %q, want %q", d.Name, tr.Name(src))
		}
		if err != nil {
			if strings.Contains(err.Error(), marker) || (len(v1) > 3 && strings.Contains(err.Error(), v1)) {
				t.Fatalf("the error holds a value: %v", err)
			}
			return
		}

		// Keys: each from one source key, with its value, as the rule says.
		values := map[string][]byte{}
		for k, v := range src.Data {
			values[k] = []byte(v)
		}
		for k, v := range src.Bytes {
			values[k] = v
		}
		from := map[string]string{}
		check := func(k string, v []byte) {
			var origin []string
			for sk := range values {
				if tr.rename(sk) == k && (tr.Include == nil || tr.Include[sk]) && !tr.Exclude[sk] {
					origin = append(origin, sk)
				}
			}
			if len(origin) != 1 {
				t.Fatalf("copy key %q comes from source keys %q", k, origin)
			}
			if !bytes.Equal(values[origin[0]], v) {
				t.Fatalf("copy key %q does not hold the value of source key %q", k, origin[0])
			}
			if _, dup := from[k]; dup {
				t.Fatalf("copy key %q is in both data and binaryData", k)
			}
			from[k] = origin[0]
		}
		for k, v := range d.Data {
			if (!secret || into) && !utf8.ValidString(v) && secret {
				t.Fatalf("ConfigMap data key %q is not valid UTF-8", k)
			}
			check(k, []byte(v))
		}
		for k, v := range d.Bytes {
			check(k, v)
		}
		copyKind := copyKindOf(p)
		if copyKind.Kind == v1alpha1.KindConfigMap && d.Type != "" {
			t.Fatalf("a ConfigMap copy has a Secret type %q", d.Type)
		}
		if secret && !into && len(d.Data) > 0 {
			t.Fatal("a Secret copy has ConfigMap data")
		}

		// Labels: never the provider's, never a dropped one the rule does
		// not add, always those it adds.
		for k := range d.Labels {
			if ProviderKey(k) || k == LabelRuleUID {
				t.Fatalf("the copy's labels hold the provider's key %q", k)
			}
			if _, addedByRule := tr.Labels[k]; !addedByRule && (tr.DropLabels[k] || (len(tr.DropLabelPrefixes) > 0 && strings.HasPrefix(k, dropPrefix))) {
				t.Fatalf("dropped label %q is on the copy", k)
			}
		}
		for k, v := range tr.Labels {
			if !ProviderKey(k) && d.Labels[k] != v {
				t.Fatalf("added label %q is %q on the copy, want %q", k, d.Labels[k], v)
			}
		}

		// Written and read back, the copy is in sync with its template.
		owner := Owner{UID: "uid-1", Namespace: "apps", Name: "rule"}
		h := Hash(d)
		c := Desired(owner, d, h, "team-a", nil, false)
		var back Object
		switch o := c.ToAPI(copyKind).(type) {
		case *corev1.ConfigMap:
			back = FromConfigMap(o)
		case *corev1.Secret:
			back = FromSecret(o)
		}
		if !InSync(owner, d, h, back) || c.Annotations[AnnotationHash] != h || c.Labels[LabelRuleUID] != owner.UID {
			t.Fatalf("the copy %+v of template %+v is not in sync with it", back, d)
		}
		if c.Annotations[AnnotationSource] != "shared/src" {
			t.Fatalf("the copy names source %q", c.Annotations[AnnotationSource])
		}
		if again, _ := tr.Apply(src); Hash(again) != h {
			t.Fatal("the same source and rule give another hash")
		}
	})
}
