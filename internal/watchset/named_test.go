package watchset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestNamedIsOneNameInOneNamespace(t *testing.T) {
	cm := corev1.SchemeGroupVersion.WithResource("configmaps")
	g := group{cluster: "c", resource: cm, namespace: "ns"}
	cases := map[string]struct {
		reason string
		w      Watch
		want   string
		label  string
	}{
		"Name":       {reason: "One exact name in a namespace is a name watch.", w: Watch{Resource: cm, Namespace: "ns", Fields: "metadata.name=conf"}, want: "conf"},
		"AllSpaces":  {reason: "A name in every namespace is not: its shared watch would be the whole cluster's.", w: Watch{Resource: cm, Fields: "metadata.name=conf"}},
		"Labels":     {reason: "A label selector narrows it further than the name.", w: Watch{Resource: cm, Namespace: "ns", Labels: "a=b", Fields: "metadata.name=conf"}},
		"ReadLabels": {reason: "A watch read for labels keeps its own store.", w: Watch{Resource: cm, Namespace: "ns", Fields: "metadata.name=conf", ReadLabels: true}},
		"Terms":      {reason: "More than one term is not one name.", w: Watch{Resource: cm, Namespace: "ns", Fields: "metadata.name=conf,metadata.namespace=ns"}},
		"NotEqual":   {reason: "Every object but one is not a name.", w: Watch{Resource: cm, Namespace: "ns", Fields: "metadata.name!=conf"}},
		"DoubleEq":   {reason: "Only the one spelling keeps names and watches one to one.", w: Watch{Resource: cm, Namespace: "ns", Fields: "metadata.name==conf"}},
		"Empty":      {reason: "An empty name names nothing.", w: Watch{Resource: cm, Namespace: "ns", Fields: "metadata.name="}},
		"Other":      {reason: "Other fields are not names.", w: Watch{Resource: cm, Namespace: "ns", Fields: "type=Opaque"}},
		"Label":      {reason: "One label's one value is a value watch, in every namespace too.", w: Watch{Resource: cm, Labels: "rule=abc"}, want: "abc", label: "rule"},
		"LabelTerms": {reason: "More than one label term is not one value.", w: Watch{Resource: cm, Labels: "rule=abc,app=web"}},
		"LabelSet":   {reason: "A set of values is not one value.", w: Watch{Resource: cm, Labels: "rule in (a,b)"}},
		"LabelNot":   {reason: "Every value but one is not one value.", w: Watch{Resource: cm, Labels: "rule!=abc"}},
		"LabelExist": {reason: "A bare key is every value.", w: Watch{Resource: cm, Labels: "rule"}},
		"LabelField": {reason: "A label and a field narrow further than the value.", w: Watch{Resource: cm, Labels: "rule=abc", Fields: "metadata.name=x"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gotG, got, ok := key{cluster: "c", Watch: tc.w}.named()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nnamed(): -want name, +got:\n%s", tc.reason, diff)
			}
			if ok != (tc.want != "") {
				t.Errorf("\n%s\nnamed() ok = %v", tc.reason, ok)
			}
			if ok {
				want := g
				if tc.label != "" {
					want = group{cluster: "c", resource: cm, label: tc.label}
				}
				if diff := cmp.Diff(want, gotG, cmp.AllowUnexported(group{})); diff != "" {
					t.Errorf("\n%s\nnamed(): -want group, +got:\n%s", tc.reason, diff)
				}
				if diff := cmp.Diff(tc.w, want.watch(got).Watch); diff != "" {
					t.Errorf("\n%s\nwatch(name): -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}
