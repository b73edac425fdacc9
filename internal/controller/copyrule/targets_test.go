package copyrule

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
)

var everywhere = reach.Policy{Config: "test", OwnNamespace: true, Namespaces: []string{"*"}, Denied: reach.DefaultDenied, ProviderNamespace: "crossplane-system"}

var cluster = []Namespace{
	{Name: "default"},
	{Name: "kube-system"},
	{Name: "crossplane-system"},
	{Name: "team-a", Labels: map[string]string{"pull": "true"}},
	{Name: "team-b"},
	{Name: "team-old", Labels: map[string]string{"pull": "true"}, Terminating: true},
	{Name: "team-quiet", Labels: map[string]string{"pull": "true", LabelIgnore: "true"}},
	{Name: "shared"},
}

func TestSelectTargets(t *testing.T) {
	cases := map[string]struct {
		reason string
		p      v1alpha1.CopyRuleParameters
		r      reach.Policy
		want   Targets
		err    bool
	}{
		"AllNamespaces": {
			reason: "Every namespace within reach, minus the source, terminating and ignored ones.",
			p:      v1alpha1.CopyRuleParameters{AllNamespaces: true},
			r:      everywhere,
			want:   Targets{Namespaces: []string{"shared", "team-a", "team-b"}},
		},
		"Pattern": {
			reason: "The pattern must match the whole name.",
			p:      v1alpha1.CopyRuleParameters{NamespacePattern: "team-[ab]"},
			r:      everywhere,
			want:   Targets{Namespaces: []string{"team-a", "team-b"}},
		},
		"PatternIsAnchored": {
			reason: "A pattern matching part of a name does not select it.",
			p:      v1alpha1.CopyRuleParameters{NamespacePattern: "team"},
			r:      everywhere,
			want:   Targets{Namespaces: []string{}},
		},
		"Selector": {
			reason: "Labelled namespaces that are live and not ignored.",
			p:      v1alpha1.CopyRuleParameters{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pull": "true"}}},
			r:      everywhere,
			want:   Targets{Namespaces: []string{"team-a"}},
		},
		"ListedOutOfReachAndMissing": {
			reason: "Listed namespaces out of reach are reported; missing ones are named; the source never is a target.",
			p:      v1alpha1.CopyRuleParameters{Namespaces: []string{"team-a", "kube-system", "default", "team-new"}},
			r:      everywhere,
			want: Targets{
				Namespaces: []string{"team-a"},
				OutOfReach: map[string]string{"kube-system": `namespace "kube-system" is out of reach: test denies it (deniedNamespaces: "kube-system")`},
				Missing:    []string{"team-new"},
			},
		},
		"SelectedBeyondReach": {
			reason: "Namespaces that a selection mode picks beyond reach are simply not targets.",
			p:      v1alpha1.CopyRuleParameters{AllNamespaces: true},
			r:      reach.Policy{Config: "test", OwnNamespace: true, Namespaces: []string{"team-*"}},
			want:   Targets{Namespaces: []string{"team-a", "team-b"}},
		},
		"NoReach": {
			reason: "A config without reach leaves no target but the rule's own namespace, which is the source.",
			p:      v1alpha1.CopyRuleParameters{AllNamespaces: true},
			r:      reach.Policy{Config: "test", OwnNamespace: true},
			want:   Targets{Namespaces: []string{}},
		},
		"BadPattern": {
			reason: "An invalid pattern is an error, not an empty selection.",
			p:      v1alpha1.CopyRuleParameters{NamespacePattern: "team-("},
			r:      everywhere,
			err:    true,
		},
		"NoMode": {
			reason: "A rule without a target mode is an error.",
			r:      everywhere,
			err:    true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SelectTargets(tc.p, "default", []string{"default"}, cluster, tc.r)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nSelectTargets(...): error %v, want error %t", tc.reason, err, tc.err)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nSelectTargets(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzSelectTargets feeds user patterns and selector values: selection never
// panics, and never yields the source, a denied, terminating or ignored namespace.
func FuzzSelectTargets(f *testing.F) {
	f.Add("team-.*", "pull", "true")
	f.Add("(", "", "")
	f.Add(".*", "a/b", "x")
	f.Fuzz(func(t *testing.T, pattern, key, value string) {
		for _, p := range []v1alpha1.CopyRuleParameters{
			{NamespacePattern: pattern},
			{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}},
			{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn, Values: []string{value}}}}},
		} {
			got, err := SelectTargets(p, "default", []string{"default"}, cluster, everywhere)
			if err != nil {
				continue
			}
			for _, ns := range got.Namespaces {
				switch ns {
				case "default", "kube-system", "crossplane-system", "team-old", "team-quiet":
					t.Fatalf("SelectTargets(%+v) selected %q", p, ns)
				}
			}
		}
	})
}
