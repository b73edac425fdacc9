package reach

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func mustSelector(t *testing.T, ls *metav1.LabelSelector) labels.Selector {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheck(t *testing.T) {
	grant := Policy{
		Config:            `ClusterProviderConfig "default"`,
		Namespaces:        []string{"team-*", "shared"},
		Denied:            append([]string{"team-secret"}, DefaultDenied...),
		ProviderNamespace: "crossplane-system",
	}
	withSelector := grant
	withSelector.Selector = mustSelector(t, &metav1.LabelSelector{MatchLabels: map[string]string{"clusterops.io/reachable": "true"}})

	type args struct {
		policy Policy
		own    string
		ns     string
		labels map[string]string
	}
	type want struct {
		allowed bool
		reason  string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"OwnNamespaceWithoutGrant": {
			reason: "A managed resource may always act in its own namespace.",
			args:   args{policy: Policy{Config: `ProviderConfig "p"`}, own: "apps", ns: "apps"},
			want:   want{allowed: true},
		},
		"OtherNamespaceWithoutGrant": {
			reason: "A config without reach grants nothing beyond the own namespace.",
			args:   args{policy: Policy{Config: `ProviderConfig "p"`}, own: "apps", ns: "other"},
			want:   want{reason: `namespace "other" is out of reach: ProviderConfig "p" grants no reach beyond the managed resource's namespace "apps"`},
		},
		"ExactName": {
			reason: "A listed name is reachable.",
			args:   args{policy: grant, own: "apps", ns: "shared"},
			want:   want{allowed: true},
		},
		"Glob": {
			reason: "A glob pattern matches.",
			args:   args{policy: grant, own: "apps", ns: "team-a"},
			want:   want{allowed: true},
		},
		"GlobDoesNotMatchPrefix": {
			reason: "A glob must match the whole name.",
			args:   args{policy: grant, own: "apps", ns: "my-team-a"},
			want:   want{reason: `namespace "my-team-a" is out of reach: it matches neither reach.namespaces nor reach.namespaceSelector of ClusterProviderConfig "default"`},
		},
		"DeniedBeatsGranted": {
			reason: "The deny list wins over a matching grant.",
			args:   args{policy: grant, own: "apps", ns: "team-secret"},
			want:   want{reason: `namespace "team-secret" is out of reach: ClusterProviderConfig "default" denies it (deniedNamespaces: "team-secret")`},
		},
		"KubeSystemDeniedByDefault": {
			reason: "kube-system is denied even when a wildcard grants everything.",
			args:   args{policy: Policy{Config: "c", Namespaces: []string{"*"}, Denied: DefaultDenied}, own: "apps", ns: "kube-system"},
			want:   want{reason: `namespace "kube-system" is out of reach: c denies it (deniedNamespaces: "kube-system")`},
		},
		"WildcardGrantsOthers": {
			reason: "A '*' grant reaches every namespace that is not denied.",
			args:   args{policy: Policy{Config: "c", Namespaces: []string{"*"}, Denied: DefaultDenied}, own: "apps", ns: "anything"},
			want:   want{allowed: true},
		},
		"ProviderNamespaceAlwaysDenied": {
			reason: "The provider's namespace is denied even with an empty deny list and a wildcard grant.",
			args:   args{policy: Policy{Config: "c", Namespaces: []string{"*"}, ProviderNamespace: "crossplane-system"}, own: "apps", ns: "crossplane-system"},
			want:   want{reason: `namespace "crossplane-system" is out of reach: it is the provider's own namespace`},
		},
		"OwnNamespaceEvenIfDenied": {
			reason: "The deny list limits grants, not the managed resource's own namespace.",
			args:   args{policy: grant, own: "team-secret", ns: "team-secret"},
			want:   want{allowed: true},
		},
		"SelectorMatches": {
			reason: "A namespace whose labels match the selector is reachable.",
			args:   args{policy: withSelector, own: "apps", ns: "labelled", labels: map[string]string{"clusterops.io/reachable": "true"}},
			want:   want{allowed: true},
		},
		"SelectorDoesNotMatch": {
			reason: "A namespace whose labels do not match is not reachable.",
			args:   args{policy: withSelector, own: "apps", ns: "unlabelled", labels: map[string]string{"x": "y"}},
			want:   want{reason: `namespace "unlabelled" is out of reach: it matches neither reach.namespaces nor reach.namespaceSelector of ClusterProviderConfig "default"`},
		},
		"SelectorDoesNotBeatDeny": {
			reason: "A matching label does not lift a denial.",
			args:   args{policy: withSelector, own: "apps", ns: "kube-public", labels: map[string]string{"clusterops.io/reachable": "true"}},
			want:   want{reason: `namespace "kube-public" is out of reach: ClusterProviderConfig "default" denies it (deniedNamespaces: "kube-public")`},
		},
		"EmptyNamespace": {
			reason: "An empty namespace name is refused, not treated as cluster-wide.",
			args:   args{policy: grant, own: "apps", ns: ""},
			want:   want{reason: `namespace "" is out of reach: no namespace given`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.args.policy.Check(tc.args.own, tc.args.ns, tc.args.labels)
			got := want{allowed: err == nil}
			if err != nil {
				got.reason = err.Error()
				if !IsOutOfReach(err) {
					t.Errorf("\n%s\nIsOutOfReach(%v) = false, want true", tc.reason, err)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nCheck(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func FuzzCheck(f *testing.F) {
	f.Add("team-*", "team-a", "apps")
	f.Add("[", "x", "y")
	f.Fuzz(func(t *testing.T, pattern, ns, own string) {
		p := Policy{Config: "c", Namespaces: []string{pattern}, Denied: DefaultDenied, ProviderNamespace: "crossplane-system"}
		err := p.Check(own, ns, nil)
		if ns == own && err != nil {
			t.Fatalf("own namespace %q refused: %v", ns, err)
		}
		if ns != own && (ns == "crossplane-system" || ns == "kube-system") && err == nil {
			t.Fatalf("denied namespace %q allowed", ns)
		}
	})
}
