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

func TestCheckRefusesDeniedBeforeGrantingOwn(t *testing.T) {
	grant := Policy{
		Config:            `ClusterProviderConfig "default"`,
		OwnNamespace:      true,
		Namespaces:        []string{"team-*", "shared"},
		Denied:            append([]string{"team-secret"}, DefaultDenied...),
		ProviderNamespace: "crossplane-system",
	}
	withSelector := grant
	withSelector.Selector = mustSelector(t, &metav1.LabelSelector{MatchLabels: map[string]string{"clusterops.io/reachable": "true"}})
	// remote is a ClusterProviderConfig of another cluster: it grants its
	// reach and nothing else.
	remote := Policy{
		Config:            `ClusterProviderConfig "remote-prod"`,
		Namespaces:        []string{"shared-config"},
		Denied:            []string{"payments", "kube-system"},
		ProviderNamespace: "crossplane-system",
	}
	own := Policy{Config: `ProviderConfig "p"`, OwnNamespace: true, ProviderNamespace: "crossplane-system"}

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
			reason: "A ProviderConfig, or a ClusterProviderConfig of the provider's cluster, grants the own namespace.",
			args:   args{policy: own, own: "apps", ns: "apps"},
			want:   want{allowed: true},
		},
		"OtherNamespaceWithoutGrant": {
			reason: "A config without reach grants nothing beyond the own namespace.",
			args:   args{policy: own, own: "apps", ns: "other"},
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
		"OwnNamespaceDenied": {
			reason: "The deny list wins over the own namespace too.",
			args:   args{policy: grant, own: "team-secret", ns: "team-secret"},
			want:   want{reason: `namespace "team-secret" is out of reach: ClusterProviderConfig "default" denies it (deniedNamespaces: "team-secret")`},
		},
		"OwnNamespaceIsTheProviders": {
			reason: "The provider's namespace wins over the own namespace.",
			args:   args{policy: own, own: "crossplane-system", ns: "crossplane-system"},
			want:   want{reason: `namespace "crossplane-system" is out of reach: it is the provider's own namespace`},
		},
		"RemoteOwnNamespaceDenied": {
			reason: "On another cluster, the own namespace's name is denied like any other.",
			args:   args{policy: remote, own: "payments", ns: "payments"},
			want:   want{reason: `namespace "payments" is out of reach: ClusterProviderConfig "remote-prod" denies it (deniedNamespaces: "payments")`},
		},
		"RemoteOwnNamespaceNotGranted": {
			reason: "On another cluster, a namespace of the own namespace's name is reached only through a grant.",
			args:   args{policy: remote, own: "apps", ns: "apps"},
			want:   want{reason: `namespace "apps" is out of reach: it matches neither reach.namespaces nor reach.namespaceSelector of ClusterProviderConfig "remote-prod", which is for another cluster, where a namespace of the managed resource's name is not its own`},
		},
		"RemoteGranted": {
			reason: "On another cluster, a granted namespace is reachable.",
			args:   args{policy: remote, own: "payments", ns: "shared-config"},
			want:   want{allowed: true},
		},
		"RemoteWithoutGrant": {
			reason: "A config of another cluster without reach grants nothing at all.",
			args:   args{policy: Policy{Config: "r"}, own: "apps", ns: "apps"},
			want:   want{reason: `namespace "apps" is out of reach: r grants no reach, and on its cluster a namespace is reached only through a grant`},
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

// FuzzCheck: the provider's namespace and a denied one are never reachable,
// the own namespace included; without OwnNamespace the own namespace is
// reachable exactly when a grant names it; with it, always unless denied.
func FuzzCheck(f *testing.F) {
	f.Add("team-*", "team-a", "apps", true)
	f.Add("[", "x", "y", false)
	f.Add("*", "payments", "payments", false)
	f.Add("*", "kube-system", "kube-system", true)
	f.Fuzz(func(t *testing.T, pattern, ns, own string, ownNamespace bool) {
		p := Policy{Config: "c", OwnNamespace: ownNamespace, Namespaces: []string{pattern}, Denied: DefaultDenied, ProviderNamespace: "crossplane-system"}
		err := p.Check(own, ns, nil)
		_, denied := matchAny(DefaultDenied, ns)
		_, granted := matchAny(p.Namespaces, ns)
		switch {
		case (denied || ns == "crossplane-system" || ns == "") && err == nil:
			t.Fatalf("denied namespace %q (own %q) allowed", ns, own)
		case denied || ns == "crossplane-system" || ns == "":
		case ns == own && ownNamespace && err != nil:
			t.Fatalf("own namespace %q refused: %v", ns, err)
		case granted != (err == nil) && (ns != own || !ownNamespace):
			t.Fatalf("namespace %q (own %q, granted %t): Check = %v", ns, own, granted, err)
		}
	})
}
