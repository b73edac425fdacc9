package integration

import "testing"

// TestCopyRuleAdmission checks that invalid CopyRules are refused with a
// message that says what to fix, and that valid ones are accepted.
func TestCopyRuleAdmission(t *testing.T) {
	rule := func(forProvider string) string {
		return `{apiVersion: copy.clusterops.io/v1alpha1, kind: CopyRule, metadata: {generateName: adm-}, spec: {forProvider: ` + forProvider + `}}`
	}
	admit(t, map[string]admission{
		"Minimal": {
			reason: "A kind, a selector and one target mode are enough.",
			yaml:   rule(`{kind: ConfigMap, selector: {matchLabels: {copyrator: "true"}}, allNamespaces: true}`),
		},
		"NamesOnly": {
			reason: "Names without a selector select sources.",
			yaml:   rule(`{kind: Secret, names: [registry-pull], namespaceSelector: {matchLabels: {pulls: "true"}}}`),
		},
		"Full": {
			reason: "Every field together, with one target mode, is accepted.",
			yaml:   rule(`{kind: Secret, sourceNamespace: shared, selector: {matchExpressions: [{key: tier, operator: In, values: [shared]}]}, names: [a, b], namespacePattern: "^team-[a-z]+$", conflictPolicy: Adopt, maxParallelWrites: 32}`),
		},
		"UnknownKind": {
			reason: "Only ConfigMaps and Secrets are copied.",
			yaml:   rule(`{kind: Deployment, names: [a], allNamespaces: true}`),
			want:   `Unsupported value: "Deployment"`,
		},
		"NoSelection": {
			reason: "A rule must say which sources it copies.",
			yaml:   rule(`{kind: ConfigMap, allNamespaces: true}`),
			want:   "set a non-empty selector or names",
		},
		"EmptySelector": {
			reason: "An empty selector would copy everything in the namespace.",
			yaml:   rule(`{kind: ConfigMap, selector: {}, allNamespaces: true}`),
			want:   "set a non-empty selector or names",
		},
		"NoTarget": {
			reason: "A rule must say where it copies to.",
			yaml:   rule(`{kind: ConfigMap, names: [a]}`),
			want:   "set exactly one of namespaces, namespacePattern, namespaceSelector or allNamespaces: true",
		},
		"TwoTargetModes": {
			reason: "Target modes exclude each other.",
			yaml:   rule(`{kind: ConfigMap, names: [a], namespaces: [b], allNamespaces: true}`),
			want:   "set exactly one of namespaces, namespacePattern, namespaceSelector or allNamespaces: true",
		},
		"AllNamespacesFalse": {
			reason: "allNamespaces: false is no target mode.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: false}`),
			want:   "set exactly one of namespaces, namespacePattern, namespaceSelector or allNamespaces: true",
		},
		"InvalidPattern": {
			reason: "A pattern that is no regular expression is refused.",
			yaml:   rule(`{kind: ConfigMap, names: [a], namespacePattern: "team-(["}`),
			want:   "namespacePattern",
		},
		"InvalidNamespaceName": {
			reason: "Target namespaces are namespace names.",
			yaml:   rule(`{kind: ConfigMap, names: [a], namespaces: [Team_A]}`),
			want:   "spec.forProvider.namespaces[0]",
		},
		"UnknownConflictPolicy": {
			reason: "Only the three policies exist.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, conflictPolicy: Merge}`),
			want:   `Unsupported value: "Merge"`,
		},
		"ZeroParallelWrites": {
			reason: "At least one write at a time.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, maxParallelWrites: 0}`),
			want:   "spec.forProvider.maxParallelWrites",
		},
	})
}
