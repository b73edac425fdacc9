package copyrule

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

func TestTransformApply(t *testing.T) {
	secret := Object{
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db", Labels: map[string]string{"app": "db"}, Annotations: map[string]string{"theirs": "x"}},
		Bytes:      map[string][]byte{"host": []byte("db.local"), "password": []byte("s3cret"), "cert": {0xff, 0xfe, 0x00}},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  true,
	}
	cm := Object{
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "cfg"},
		Data:       map[string]string{"a": "1", "b": "2"},
		Bytes:      map[string][]byte{"bin": {0x00}},
	}
	src := map[string]string{AnnotationSource: "platform/db"}
	type want struct {
		o   Object
		err string
	}
	cases := map[string]struct {
		reason string
		p      v1alpha1.CopyRuleParameters
		src    Object
		want   want
	}{
		"Identity": {
			reason: "Without keys, name, into or metadata the copy holds the source's content, labels and type.",
			p:      v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindSecret},
			src:    secret,
			want: want{o: Object{
				ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db", Labels: map[string]string{"app": "db"}, Annotations: src},
				Bytes:      secret.Bytes, Type: corev1.SecretTypeOpaque, Immutable: true,
			}},
		},
		"Include": {
			reason: "Only included keys are copied; a listed key the source lacks is skipped.",
			p:      v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindSecret, Keys: &v1alpha1.CopyKeys{Include: []string{"host", "port"}}},
			src:    secret,
			want: want{o: Object{
				ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db", Labels: map[string]string{"app": "db"}, Annotations: src},
				Bytes:      map[string][]byte{"host": []byte("db.local")}, Type: corev1.SecretTypeOpaque, Immutable: true,
			}},
		},
		"EmptyInclude": {
			reason: "An empty include copies no key: the copy exists, without data.",
			p:      v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Keys: &v1alpha1.CopyKeys{Include: []string{}}},
			src:    cm,
			want:   want{o: Object{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "cfg", Annotations: map[string]string{AnnotationSource: "platform/cfg"}}}},
		},
		"ExcludeAndRename": {
			reason: "Excluded keys are left out, renamed ones copied under their new name, in data and binaryData alike.",
			p:      v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Keys: &v1alpha1.CopyKeys{Exclude: []string{"b"}, Rename: map[string]v1alpha1.DataKey{"a": "A", "bin": "BIN"}}},
			src:    cm,
			want: want{o: Object{
				ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "cfg", Annotations: map[string]string{AnnotationSource: "platform/cfg"}},
				Data:       map[string]string{"A": "1"}, Bytes: map[string][]byte{"BIN": {0x00}},
			}},
		},
		"Swap": {
			reason: "Two keys may swap names: no name is used twice.",
			p:      v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Keys: &v1alpha1.CopyKeys{Rename: map[string]v1alpha1.DataKey{"a": "b", "b": "a"}}},
			src:    cm,
			want: want{o: Object{
				ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "cfg", Annotations: map[string]string{AnnotationSource: "platform/cfg"}},
				Data:       map[string]string{"a": "2", "b": "1"}, Bytes: cm.Bytes,
			}},
		},
		"RenameCollides": {
			reason: "A key renamed to a key the source also copies is an error that names keys, not values; the template keeps the copy's name.",
			p:      v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Keys: &v1alpha1.CopyKeys{Rename: map[string]v1alpha1.DataKey{"a": "bin"}}},
			src:    cm,
			want: want{
				o:   Object{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "cfg", Annotations: map[string]string{AnnotationSource: "platform/cfg"}}},
				err: `not copied: keys "a" and "bin" would both be copied as "bin"; rename or exclude one of them (spec.forProvider.keys)`,
			},
		},
		"CopyName": {
			reason: "The copy gets another name; the source annotation still names the source.",
			p:      v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Names: []string{"cfg"}, CopyName: "cfg-copy"},
			src:    cm,
			want: want{o: Object{
				ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "cfg-copy", Annotations: map[string]string{AnnotationSource: "platform/cfg"}},
				Data:       cm.Data, Bytes: cm.Bytes,
			}},
		},
		"IntoConfigMap": {
			reason: "A Secret into a ConfigMap: text into data, other bytes into binaryData, no type; immutability is kept.",
			p:      v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindSecret, Into: v1alpha1.KindConfigMap, Keys: &v1alpha1.CopyKeys{Exclude: []string{"password"}}},
			src:    secret,
			want: want{o: Object{
				ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db", Labels: map[string]string{"app": "db"}, Annotations: src},
				Data:       map[string]string{"host": "db.local"}, Bytes: map[string][]byte{"cert": {0xff, 0xfe, 0x00}}, Immutable: true,
			}},
		},
		"IntoIgnoredForConfigMaps": {
			reason: "into only applies to Secrets (admission refuses it with kind: ConfigMap).",
			p:      v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Into: v1alpha1.KindConfigMap},
			src:    cm,
			want: want{o: Object{
				ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "cfg", Annotations: map[string]string{AnnotationSource: "platform/cfg"}},
				Data:       cm.Data, Bytes: cm.Bytes,
			}},
		},
		"Metadata": {
			reason: "Dropped labels go, added ones win over the source's, added annotations are the only ones from the spec; the provider's keys are never taken from it.",
			p: v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Metadata: &v1alpha1.CopyMetadata{
				DropLabels:        []string{"argocd.argoproj.io/instance"},
				DropLabelPrefixes: []string{"app.kubernetes.io/"},
				Labels:            map[string]v1alpha1.LabelValue{"team": "platform", "tier": "copied", LabelRuleUID: "forged"},
				Annotations:       map[string]v1alpha1.AnnotationValue{"note": "copied by a rule", AnnotationRule: "forged/rule"},
			}},
			src: Object{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "cfg", Labels: map[string]string{
				"argocd.argoproj.io/instance": "platform", "app.kubernetes.io/instance": "p", "app.kubernetes.io/name": "p", "tier": "source", "keep": "yes", LabelRuleUID: "x",
			}}},
			want: want{o: Object{ObjectMeta: metav1.ObjectMeta{
				Namespace: "platform", Name: "cfg",
				Labels:      map[string]string{"team": "platform", "tier": "copied", "keep": "yes"},
				Annotations: map[string]string{"note": "copied by a rule", AnnotationSource: "platform/cfg"},
			}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := NewTransform(tc.p).Apply(tc.src)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.want.err, gotErr); diff != "" {
				t.Errorf("%s\nApply(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.o, got); diff != "" {
				t.Errorf("%s\nApply(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// copyKindOf is the Mapping of rule p's copies, for rules of ConfigMaps and
// Secrets, which need no cluster to resolve.
func copyKindOf(p v1alpha1.CopyRuleParameters) Mapping {
	k, _ := resolveKind(copyGVK(p), nil)
	return k
}

func TestCopyGVK(t *testing.T) {
	cases := map[string]struct {
		reason string
		p      v1alpha1.CopyRuleParameters
		want   string
	}{
		"Secret":        {reason: "Secrets are copied into Secrets.", p: v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindSecret}, want: v1alpha1.KindSecret},
		"ConfigMap":     {reason: "ConfigMaps into ConfigMaps.", p: v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap}, want: v1alpha1.KindConfigMap},
		"IntoConfigMap": {reason: "Secrets into ConfigMaps only when the rule says so.", p: v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindSecret, Into: v1alpha1.KindConfigMap}, want: v1alpha1.KindConfigMap},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := copyGVK(tc.p).Kind; got != tc.want {
				t.Errorf("%s\ncopyGVK(...).Kind = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

// TestAddedAnnotations checks that the annotations a rule adds are written,
// followed when they change, removed when the rule stops adding them, and
// that others' annotations on a copy are never touched.
func TestAddedAnnotations(t *testing.T) {
	src := Object{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "cfg"}, Data: map[string]string{"k": "v"}}
	template := func(a map[string]v1alpha1.AnnotationValue) Object {
		d, err := NewTransform(v1alpha1.CopyRuleParameters{Kind: v1alpha1.KindConfigMap, Metadata: &v1alpha1.CopyMetadata{Annotations: a}}).Apply(src)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := template(map[string]v1alpha1.AnnotationValue{"a": "1", "b": "2"})
	c := Desired(rule, first, Hash(first), "team", nil, false)
	c.Annotations["theirs"] = "kept"

	cases := map[string]struct {
		reason     string
		d          Object
		inSync     bool
		wantAnnots map[string]string
	}{
		"Same": {
			reason: "The annotations the rule adds are in place: nothing to write.",
			d:      first, inSync: true,
			wantAnnots: map[string]string{"a": "1", "b": "2", "theirs": "kept"},
		},
		"ValueChanged": {
			reason:     "A changed value rewrites the copy.",
			d:          template(map[string]v1alpha1.AnnotationValue{"a": "1", "b": "3"}),
			wantAnnots: map[string]string{"a": "1", "b": "3", "theirs": "kept"},
		},
		"Removed": {
			reason:     "An annotation the rule no longer adds leaves the copy; others' stay.",
			d:          template(map[string]v1alpha1.AnnotationValue{"a": "1"}),
			wantAnnots: map[string]string{"a": "1", "theirs": "kept"},
		},
		"AllRemoved": {
			reason:     "No added annotation left: the list goes too.",
			d:          template(nil),
			wantAnnots: map[string]string{"theirs": "kept"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := Hash(tc.d)
			if got := InSync(rule, tc.d, h, c); got != tc.inSync {
				t.Errorf("%s\nInSync(...) = %t, want %t", tc.reason, got, tc.inSync)
			}
			u := Desired(rule, tc.d, h, "team", &c, false)
			if !InSync(rule, tc.d, h, u) {
				t.Errorf("%s\nthe updated copy is not in sync", tc.reason)
			}
			got := map[string]string{}
			for k, v := range u.Annotations {
				if !ProviderKey(k) {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tc.wantAnnots, got); diff != "" {
				t.Errorf("%s\nannotations: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestProviderKey(t *testing.T) {
	cases := map[string]struct {
		reason string
		key    string
		want   bool
	}{
		"Domain":    {reason: "The provider's domain.", key: "clusterops.io/x", want: true},
		"Subdomain": {reason: "Its subdomains.", key: LabelRuleUID, want: true},
		"Lookalike": {reason: "Another domain ending in the same letters is not the provider's.", key: "myclusterops.io/x"},
		"NoPrefix":  {reason: "A key without a domain.", key: "clusterops.io"},
		"Other":     {reason: "Another tool's key.", key: "argocd.argoproj.io/instance"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ProviderKey(tc.key); got != tc.want {
				t.Errorf("%s\nProviderKey(%q) = %t, want %t", tc.reason, tc.key, got, tc.want)
			}
		})
	}
}
