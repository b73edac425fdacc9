package copyrule

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

func TestInterestMatchesEventsToTheRulesTheyConcern(t *testing.T) {
	rule := func(p v1alpha1.CopyRuleParameters) *v1alpha1.CopyRule {
		return &v1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r"}, Spec: v1alpha1.CopyRuleSpec{ForProvider: p}}
	}
	ns := func(name string, lbls map[string]string) *watchset.Object {
		return &watchset.Object{Name: name, Labels: lbls}
	}
	sources := watchset.Watch{Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Namespace: "team-a"}
	cases := map[string]struct {
		reason string
		rule   *v1alpha1.CopyRule
		w      watchset.Watch
		o      *watchset.Object
		want   bool
	}{
		"OtherWatch": {
			reason: "Events of a rule's own watches (sources, copies) always concern it.",
			rule:   rule(v1alpha1.CopyRuleParameters{Namespaces: []string{"b"}}), w: sources, o: ns("x", nil), want: true,
		},
		"NamedTarget": {
			reason: "A namespace the rule names concerns it, such as one created after the rule.",
			rule:   rule(v1alpha1.CopyRuleParameters{Namespaces: []string{"b"}}), w: namespacesWatch, o: ns("b", nil), want: true,
		},
		"UnnamedNamespace": {
			reason: "A namespace the rule does not name concerns it not.",
			rule:   rule(v1alpha1.CopyRuleParameters{Namespaces: []string{"b"}}), w: namespacesWatch, o: ns("ci-123", nil),
		},
		"Source": {
			reason: "The source namespace concerns the rule whatever its target mode.",
			rule:   rule(v1alpha1.CopyRuleParameters{SourceNamespace: "shared", Namespaces: []string{"b"}}), w: namespacesWatch, o: ns("shared", nil), want: true,
		},
		"Own": {
			reason: "The rule's own namespace concerns it.",
			rule:   rule(v1alpha1.CopyRuleParameters{Namespaces: []string{"b"}}), w: namespacesWatch, o: ns("team-a", nil), want: true,
		},
		"SelectorMatches": {
			reason: "A namespace with the selected labels concerns the rule.",
			rule:   rule(v1alpha1.CopyRuleParameters{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}), w: namespacesWatch, o: ns("x", map[string]string{"env": "prod"}), want: true,
		},
		"SelectorMisses": {
			reason: "A namespace without them concerns it not (an update is asked before and after, so leaving the selection still counts).",
			rule:   rule(v1alpha1.CopyRuleParameters{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}), w: namespacesWatch, o: ns("x", map[string]string{"env": "dev"}),
		},
		"Pattern": {
			reason: "A pattern selects by name.",
			rule:   rule(v1alpha1.CopyRuleParameters{NamespacePattern: "team-.*"}), w: namespacesWatch, o: ns("team-b", nil), want: true,
		},
		"All": {
			reason: "A rule for all namespaces is concerned by every one.",
			rule:   rule(v1alpha1.CopyRuleParameters{AllNamespaces: true}), w: namespacesWatch, o: ns("anything", nil), want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := interest(tc.rule)(tc.w, tc.o); got != tc.want {
				t.Errorf("\n%s\ninterest(...)(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
