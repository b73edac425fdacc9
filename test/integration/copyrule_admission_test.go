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
			reason: "Of the core kinds, workloads are never copied.",
			yaml:   rule(`{kind: Deployment, names: [a], allNamespaces: true}`),
			want:   "kind Deployment of apiVersion v1 is not copied",
		},
		"KindName": {
			reason: "A kind is named as manifests write it.",
			yaml:   rule(`{kind: configmap, names: [a], allNamespaces: true}`),
			want:   "kind is a kind's name as it is written in manifests",
		},
		"APIVersionForm": {
			reason: "apiVersion is v1 or group/version.",
			yaml:   rule(`{apiVersion: "networking.k8s.io", kind: NetworkPolicy, names: [a], allNamespaces: true}`),
			want:   "apiVersion is v1 or group/version",
		},
		"KeysOfOtherKinds": {
			reason: "keys picks keys of ConfigMaps and Secrets; other kinds are copied whole.",
			yaml:   rule(`{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, names: [a], allNamespaces: true, keys: {exclude: [spec]}}`),
			want:   "keys picks keys of a ConfigMap's or a Secret's data",
		},
		"IntoFromOtherGroup": {
			reason: "into: ConfigMap is for core Secrets only.",
			yaml:   rule(`{apiVersion: example.com/v1, kind: Secret, names: [a], into: ConfigMap, allNamespaces: true}`),
			want:   "into: ConfigMap copies a Secret into a ConfigMap",
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
		"SourceNamespaces": {
			reason: "Several source namespaces, as the original Copyrator's rules listed them.",
			yaml:   rule(`{kind: ConfigMap, sourceNamespaces: [team-a, team-b], names: [a], allNamespaces: true}`),
		},
		"BothSourceFields": {
			reason: "sourceNamespace and sourceNamespaces together would leave unclear which namespaces are read.",
			yaml:   rule(`{kind: ConfigMap, sourceNamespace: team-a, sourceNamespaces: [team-b], names: [a], allNamespaces: true}`),
			want:   "set sourceNamespace or sourceNamespaces, not both",
		},
		"EmptySourceNamespaces": {
			reason: "An empty list names no source: leave the field out to read the rule's own namespace.",
			yaml:   rule(`{kind: ConfigMap, sourceNamespaces: [], names: [a], allNamespaces: true}`),
			want:   "spec.forProvider.sourceNamespaces",
		},
		"DuplicateSourceNamespaces": {
			reason: "A source namespace is listed once.",
			yaml:   rule(`{kind: ConfigMap, sourceNamespaces: [team-a, team-a], names: [a], allNamespaces: true}`),
			want:   "Duplicate value",
		},
		"InvalidSourceNamespaceName": {
			reason: "Source namespaces are namespace names.",
			yaml:   rule(`{kind: ConfigMap, sourceNamespaces: [team-a, Team_B], names: [a], allNamespaces: true}`),
			want:   "spec.forProvider.sourceNamespaces[1]",
		},
		"SourceConfig": {
			reason: "The source side may name a config of its own: sources on one cluster, copies on another.",
			yaml:   rule(`{kind: Secret, source: {providerConfigRef: {kind: ClusterProviderConfig, name: hub}}, sourceNamespaces: [platform], names: [registry-pull], allNamespaces: true}`),
		},
		"SourceConfigUnknownKind": {
			reason: "The source side's config is a ProviderConfig or a ClusterProviderConfig.",
			yaml:   rule(`{kind: Secret, source: {providerConfigRef: {kind: Secret, name: hub}}, names: [a], allNamespaces: true}`),
			want:   `Unsupported value: "Secret"`,
		},
		"SourceConfigNoName": {
			reason: "A config reference names a config.",
			yaml:   rule(`{kind: Secret, source: {providerConfigRef: {kind: ProviderConfig}}, names: [a], allNamespaces: true}`),
			want:   "spec.forProvider.source.providerConfigRef.name",
		},
		"ZeroParallelWrites": {
			reason: "At least one write at a time.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, maxParallelWrites: 0}`),
			want:   "spec.forProvider.maxParallelWrites",
		},
		"StaleAfter": {
			reason: "A bound on how long a copy may stay behind is accepted.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, staleAfter: 90s}`),
		},
		"StaleAfterTooShort": {
			reason: "A bound under a second would call every write stale.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, staleAfter: 500ms}`),
			want:   "staleAfter must be between 1s and 24h",
		},
		"StaleAfterNotDuration": {
			reason: "staleAfter is a duration.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, staleAfter: soon}`),
			want:   "staleAfter is a duration such as 90s, 10m or 1h",
		},
		// Keys, copy name, into and metadata (#19).
		"KeysAndMetadata": {
			reason: "Include with renames of included keys, another copy name for one named source, into: ConfigMap and metadata are accepted.",
			yaml: rule(`{kind: Secret, names: [db], copyName: db-public, into: ConfigMap, namespaces: [team-a],
				keys: {include: [host, port], exclude: [password], rename: {host: DB_HOST, port: DB_PORT}},
				metadata: {dropLabels: [argocd.argoproj.io/instance], dropLabelPrefixes: [app.kubernetes.io/], labels: {copied: "true"}, annotations: {note: "copied from db"}}}`),
		},
		"SwapKeys": {
			reason: "Two keys may swap names.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, keys: {include: [a, b], rename: {a: b, b: a}}}`),
		},
		"EmptyInclude": {
			reason: "An empty include would copy no key at all: leave it out to copy every key.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, keys: {include: []}}`),
			want:   "spec.forProvider.keys.include",
		},
		"IncludeAndExcludeSameKey": {
			reason: "A key cannot be both included and excluded.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, keys: {include: [a, b], exclude: [b]}}`),
			want:   "keys: a key cannot be both included and excluded",
		},
		"RenameExcluded": {
			reason: "Renaming a key that is excluded cannot work.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, keys: {exclude: [a], rename: {a: b}}}`),
			want:   "keys: an excluded key cannot be renamed",
		},
		"RenameNotIncluded": {
			reason: "With include, a renamed key must be included.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, keys: {include: [a], rename: {b: c}}}`),
			want:   "keys: with include, rename only keys that include lists",
		},
		"RenameToSameKey": {
			reason: "Two keys renamed to one would collide.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, keys: {rename: {a: c, b: c}}}`),
			want:   "keys.rename: two keys cannot be renamed to the same key",
		},
		"RenameCollidesWithIncluded": {
			reason: "A new name that another included key keeps would collide.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, keys: {include: [a, b], rename: {a: b}}}`),
			want:   "keys.rename: a new key name collides with a key include copies under its own name",
		},
		"InvalidKey": {
			reason: "Keys are ConfigMap/Secret keys.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, keys: {rename: {a: "b/c"}}}`),
			want:   "keys.rename: keys and new names are letters, digits, '-', '_' and '.'",
		},
		"CopyNameWithSelector": {
			reason: "A selector can pick several sources, which cannot all go to one name.",
			yaml:   rule(`{kind: ConfigMap, selector: {matchLabels: {a: b}}, copyName: x, allNamespaces: true}`),
			want:   "copyName needs exactly one source",
		},
		"CopyNameWithTwoNames": {
			reason: "Two sources cannot go to one name.",
			yaml:   rule(`{kind: ConfigMap, names: [a, b], copyName: x, allNamespaces: true}`),
			want:   "copyName needs exactly one source",
		},
		"IntoForConfigMaps": {
			reason: "into: ConfigMap is for Secrets; a ConfigMap is never copied into a Secret.",
			yaml:   rule(`{kind: ConfigMap, names: [a], into: ConfigMap, allNamespaces: true}`),
			want:   "into: ConfigMap copies a Secret into a ConfigMap, so it needs kind: Secret",
		},
		"IntoSecret": {
			reason: "Copying into a Secret is not a choice.",
			yaml:   rule(`{kind: ConfigMap, names: [a], into: Secret, allNamespaces: true}`),
			want:   `Unsupported value: "Secret"`,
		},
		"DropOwnershipLabel": {
			reason: "The provider's own labels are never dropped.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, metadata: {dropLabels: [copy.clusterops.io/rule-uid]}}`),
			want:   "metadata.dropLabels: the provider's own labels (clusterops.io domains) are never dropped",
		},
		"DropOwnershipPrefix": {
			reason: "Nor by prefix.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, metadata: {dropLabelPrefixes: [copy.clusterops.io/]}}`),
			want:   "metadata.dropLabelPrefixes: the provider's own labels (clusterops.io domains) are never dropped",
		},
		"SetOwnershipLabel": {
			reason: "The provider's labels cannot be set: a forged owner could make a rule prune another's copies.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, metadata: {labels: {copy.clusterops.io/rule-uid: x}}}`),
			want:   "metadata.labels: keys in the provider's domains (clusterops.io) are its own and cannot be set",
		},
		"SetOwnershipAnnotation": {
			reason: "Nor its annotations.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, metadata: {annotations: {clusterops.io/x: "v"}}}`),
			want:   "metadata.annotations: keys in the provider's domains (clusterops.io) are its own and cannot be set",
		},
		"InvalidLabelValue": {
			reason: "Added labels must be valid labels.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, metadata: {labels: {team: "a b"}}}`),
			want:   "metadata.labels: a value is at most 63 letters",
		},
		"InvalidLabelKey": {
			reason: "Added label keys must be valid keys.",
			yaml:   rule(`{kind: ConfigMap, names: [a], allNamespaces: true, metadata: {labels: {"a/b/c": x}}}`),
			want:   "metadata.labels: a key is an optional DNS subdomain",
		},
	})
}
