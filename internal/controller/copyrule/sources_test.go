package copyrule

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
	"github.com/clusterops/provider-clusterops/internal/target"
)

func src(ns, name, v string) Object {
	return Object{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"}, Data: map[string]string{"k": v}}
}

func TestSourceNamespaces(t *testing.T) {
	cases := map[string]struct {
		reason string
		p      v1alpha1.CopyRuleParameters
		want   []string
	}{
		"Own": {
			reason: "Without either field the rule copies from its own namespace.",
			want:   []string{"own"},
		},
		"One": {
			reason: "sourceNamespace keeps meaning what it meant.",
			p:      v1alpha1.CopyRuleParameters{SourceNamespace: "shared"},
			want:   []string{"shared"},
		},
		"Several": {
			reason: "sourceNamespaces lists them all, sorted, each once.",
			p:      v1alpha1.CopyRuleParameters{SourceNamespaces: []string{"b", "a", "b"}},
			want:   []string{"a", "b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SourceNamespaces(tc.p, "own")); diff != "" {
				t.Errorf("%s\nSourceNamespaces(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSourceConflicts(t *testing.T) {
	byName := func(o Object) string { return o.Name }
	oneName := func(Object) string { return "single" }
	cases := map[string]struct {
		reason    string
		sources   []Object
		name      func(Object) string
		want      []Object
		conflicts map[string][]Ref
	}{
		"NoConflict": {
			reason:  "Distinct names in several namespaces are all copied.",
			sources: []Object{src("b", "y", "1"), src("a", "x", "1")},
			name:    byName,
			want:    []Object{src("a", "x", "1"), src("b", "y", "1")},
		},
		"SameNameTwoNamespaces": {
			reason:    "A name in two source namespaces has no winner: neither is copied.",
			sources:   []Object{src("b", "x", "2"), src("a", "x", "1"), src("a", "z", "1")},
			name:      byName,
			want:      []Object{src("a", "z", "1")},
			conflicts: map[string][]Ref{"x": {{"a", "x"}, {"b", "x"}}},
		},
		"ThreeNamespaces": {
			reason:    "Every namespace holding the name is named.",
			sources:   []Object{src("c", "x", "1"), src("a", "x", "1"), src("b", "x", "1")},
			name:      byName,
			want:      []Object{},
			conflicts: map[string][]Ref{"x": {{"a", "x"}, {"b", "x"}, {"c", "x"}}},
		},
		"CopyNameAcrossNamespaces": {
			reason:    "Sources of other names that write one copy name conflict by the copy's name.",
			sources:   []Object{src("a", "x", "1"), src("b", "y", "1")},
			name:      oneName,
			want:      []Object{},
			conflicts: map[string][]Ref{"single": {{"a", "x"}, {"b", "y"}}},
		},
		"CopyNameOneNamespace": {
			reason:  "Sources of one namespace are no conflict between source namespaces.",
			sources: []Object{src("a", "x", "1"), src("a", "y", "1")},
			name:    oneName,
			want:    []Object{src("a", "x", "1"), src("a", "y", "1")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, conflicts := SourceConflicts(tc.sources, tc.name)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nSourceConflicts(...): -want +got sources:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.conflicts, conflicts); diff != "" {
				t.Errorf("%s\nSourceConflicts(...): -want +got conflicts:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestNewConflicts(t *testing.T) {
	conflicts := map[string][]Ref{"x": {{"a", "x"}, {"b", "x"}}, "y": {{"a", "y"}, {"b", "y"}}}
	cases := map[string]struct {
		reason   string
		reported []v1alpha1.CopyProblem
		want     []string
	}{
		"AllNew": {
			reason: "Conflicts not in the last status are new.",
			want:   []string{"x", "y"},
		},
		"AlreadyReported": {
			reason:   "A conflict the last status reported gets no second event.",
			reported: []v1alpha1.CopyProblem{{Namespace: "a", Name: "x", Reason: v1alpha1.ProblemSourceConflict}},
			want:     []string{"y"},
		},
		"OtherReasonNotCounted": {
			reason:   "A problem of another reason about the same name is not the conflict.",
			reported: []v1alpha1.CopyProblem{{Namespace: "t", Name: "x", Reason: v1alpha1.ProblemConflict}},
			want:     []string{"x", "y"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NewConflicts(tc.reported, conflicts)); diff != "" {
				t.Errorf("%s\nNewConflicts(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMakePlanSourceConflicts(t *testing.T) {
	own := Owner{UID: "uid", Namespace: "rules", Name: "r"}
	ok := func(string) error { return nil }
	a, b := src("a", "x", "from-a"), src("b", "x", "from-b")
	copyOfA := Desired(own, a, Hash(a), "t", nil, false)
	copyOfA.UID = "c1"
	conflicted := map[string][]Ref{"x": {{"a", "x"}, {"b", "x"}}}
	cases := map[string]struct {
		reason string
		in     PlanInput
		want   Plan
	}{
		"ConflictNoCopyYet": {
			reason: "A conflicted name is not created anywhere, and is reported once.",
			in:     PlanInput{Owner: own, Targets: Targets{Namespaces: []string{"t", "u"}}, Conflicted: conflicted, MayDelete: true, Reachable: ok},
			want: Plan{Intended: 2, Skipped: 2, Problems: []v1alpha1.CopyProblem{
				{Namespace: "a", Name: "x", Reason: v1alpha1.ProblemSourceConflict, Message: ConflictMessage(conflicted["x"])},
			}},
		},
		"ConflictKeepsCopy": {
			reason: "A copy made before the conflict is neither updated nor pruned.",
			in:     PlanInput{Owner: own, Targets: Targets{Namespaces: []string{"t"}}, Copies: []Object{copyOfA}, Conflicted: conflicted, MayDelete: true, Reachable: ok},
			want: Plan{Intended: 1, Skipped: 1, Problems: []v1alpha1.CopyProblem{
				{Namespace: "a", Name: "x", Reason: v1alpha1.ProblemSourceConflict, Message: ConflictMessage(conflicted["x"])},
			}},
		},
		"ConflictGoneFollowsRemaining": {
			reason: "Once only b holds the name, the copy follows b and records it as its source.",
			in:     PlanInput{Owner: own, Sources: []Object{b}, Targets: Targets{Namespaces: []string{"t"}}, Copies: []Object{copyOfA}, MayDelete: true, Reachable: ok},
			want: Plan{Intended: 1, Actions: []Action{
				{Op: OpUpdate, Object: Desired(own, b, Hash(b), "t", &copyOfA, false)},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := MakePlan(tc.in)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nMakePlan(...): -want +got:\n%s", tc.reason, diff)
			}
			for _, a := range got.Actions {
				if a.Object.Annotations[AnnotationSource] != "b/x" {
					t.Errorf("%s\nMakePlan(...): %s of %s/%s records source %q, want b/x", tc.reason, a.Op, a.Object.Namespace, a.Object.Name, a.Object.Annotations[AnnotationSource])
				}
			}
		})
	}
}

func TestSameCluster(t *testing.T) {
	cases := map[string]struct {
		reason string
		a, b   *target.Cluster
		want   bool
	}{
		"SameID": {
			reason: "One config and credentials: one cluster.",
			a:      &target.Cluster{ID: "local"}, b: &target.Cluster{ID: "local"},
			want: true,
		},
		"SameHost": {
			reason: "Two configs that reach one API server: one cluster, so its source namespaces are no targets.",
			a:      &target.Cluster{ID: "x", Config: &rest.Config{Host: "https://10.0.0.1:6443"}}, b: &target.Cluster{ID: "y", Config: &rest.Config{Host: "https://10.0.0.1:6443"}},
			want: true,
		},
		"Other": {
			reason: "Two API servers: two clusters.",
			a:      &target.Cluster{ID: "x", Config: &rest.Config{Host: "https://10.0.0.1:6443"}}, b: &target.Cluster{ID: "y", Config: &rest.Config{Host: "https://10.0.0.2:6443"}},
			want: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SameCluster(tc.a, tc.b); got != tc.want {
				t.Errorf("%s\nSameCluster(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestCheckSources(t *testing.T) {
	errOut := errors.New("namespace \"b\" is out of reach")
	cases := map[string]struct {
		reason string
		nss    []string
		want   error
	}{
		"AllInReach": {reason: "Every source namespace in reach: nothing to say.", nss: []string{"a", "c"}},
		"OneOut": {
			reason: "One namespace out of reach fails the rule, named.",
			nss:    []string{"a", "b"}, want: errOut,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := checkSources(tc.nss, func(ns string) error {
				if ns == "b" {
					return errOut
				}
				return nil
			})
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s\ncheckSources(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// FuzzSourceConflicts reads sources in several namespaces from the fuzzer's
// bytes and checks the conflict rule: a copy name that sources of more than
// one namespace would write is never copied and is reported with every source
// writing it; every other source is copied, once; no copy name is written
// twice.
func FuzzSourceConflicts(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, false)
	f.Add([]byte{1, 1, 2, 1, 3, 1}, false)
	f.Add([]byte{7, 7, 7, 7}, true)
	f.Fuzz(func(t *testing.T, b []byte, single bool) {
		var sources []Object
		seen := map[Ref]bool{}
		for i := 0; i+1 < len(b); i += 2 {
			r := Ref{fmt.Sprintf("ns-%d", b[i]%4), fmt.Sprintf("n-%d", b[i+1]%5)}
			if seen[r] {
				continue // An object exists once in its namespace.
			}
			seen[r] = true
			sources = append(sources, src(r.Namespace, r.Name, "v"))
		}
		name := func(o Object) string { return o.Name }
		if single {
			name = func(Object) string { return "single" }
		}
		got, conflicts := SourceConflicts(sources, name)

		nss := map[string]map[string]bool{}
		for _, s := range sources {
			if nss[name(s)] == nil {
				nss[name(s)] = map[string]bool{}
			}
			nss[name(s)][s.Namespace] = true
		}
		copied := map[string]string{}
		for _, s := range got {
			n := name(s)
			if len(nss[n]) > 1 {
				t.Fatalf("%s/%s copied as %q, which %d source namespaces would write", s.Namespace, s.Name, n, len(nss[n]))
			}
			if prev, dup := copied[n]; dup && prev != s.Namespace {
				t.Fatalf("copy %q written from %s and %s", n, prev, s.Namespace)
			}
			copied[n] = s.Namespace
		}
		for n, in := range nss {
			_, reported := conflicts[n]
			if (len(in) > 1) != reported {
				t.Fatalf("copy %q from %d namespaces: reported %t", n, len(in), reported)
			}
			if reported && len(conflicts[n]) < 2 {
				t.Fatalf("conflict %q names %v", n, conflicts[n])
			}
		}
		kept := 0
		for _, s := range sources {
			if len(nss[name(s)]) == 1 {
				kept++
			}
		}
		if kept != len(got) {
			t.Fatalf("%d sources without conflict, %d copied", kept, len(got))
		}
	})
}

func TestSelectTargetsSourceNamespaces(t *testing.T) {
	cases := map[string]struct {
		reason  string
		p       v1alpha1.CopyRuleParameters
		sources []string
		want    Targets
	}{
		"SeveralSourcesNeverTargets": {
			reason:  "On one cluster, no source namespace is a target, nor reported missing.",
			p:       v1alpha1.CopyRuleParameters{AllNamespaces: true},
			sources: []string{"default", "shared"},
			want:    Targets{Namespaces: []string{"team-a", "team-b"}},
		},
		"ListedSourceNotMissing": {
			reason:  "A listed target that is a source namespace is neither a target nor missing.",
			p:       v1alpha1.CopyRuleParameters{Namespaces: []string{"team-a", "gone-src"}},
			sources: []string{"gone-src"},
			want:    Targets{Namespaces: []string{"team-a"}},
		},
		"OtherCluster": {
			reason:  "Sources on another cluster exclude nothing: a namespace of the same name here is a target.",
			p:       v1alpha1.CopyRuleParameters{AllNamespaces: true},
			sources: nil,
			want:    Targets{Namespaces: []string{"default", "shared", "team-a", "team-b"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SelectTargets(tc.p, "default", tc.sources, cluster, everywhere)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nSelectTargets(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSourceReach(t *testing.T) {
	writes := reach.Policy{Config: "target", OwnNamespace: true, Namespaces: []string{"team-*"}}
	reads := reach.Policy{Config: "source", OwnNamespace: true, Namespaces: []string{"platform"}}
	nss := []Namespace{{Name: "platform"}, {Name: "team-a"}}
	remote := func(objs ...client.Object) *target.Cluster {
		c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
		return &target.Cluster{ID: "remote", Client: c, Config: &rest.Config{Host: "https://10.0.0.2:6443"}, Reach: reads}
	}
	cases := map[string]struct {
		reason         string
		tgt, src       *target.Cluster
		srcNSs         []string
		wantOut        []string
		wantNotTargets []string
	}{
		"SameConfig": {
			reason:         "Without a source config, the one config decides both sides, and the sources are no targets.",
			tgt:            &target.Cluster{ID: "local", Reach: writes},
			src:            &target.Cluster{ID: "local", Reach: writes},
			srcNSs:         []string{"platform", "team-a"},
			wantOut:        []string{"platform"},
			wantNotTargets: []string{"platform", "team-a"},
		},
		"SameClusterOtherConfig": {
			reason:         "A source config on the targets' cluster decides what is read: its reach, not the target config's.",
			tgt:            &target.Cluster{ID: "local", Reach: writes},
			src:            &target.Cluster{ID: "local", Reach: reads},
			srcNSs:         []string{"platform", "team-a"},
			wantOut:        []string{"team-a"},
			wantNotTargets: []string{"platform", "team-a"},
		},
		"OtherClusterOwnNamespace": {
			reason:  "On another cluster the rule's own namespace is read only when the source config grants it.",
			tgt:     &target.Cluster{ID: "local", Config: &rest.Config{Host: "https://10.0.0.1:6443"}, Reach: writes},
			src:     &target.Cluster{ID: "remote", Config: &rest.Config{Host: "https://10.0.0.2:6443"}, Reach: reach.Policy{Config: "source", Namespaces: []string{"platform"}}},
			srcNSs:  []string{"rules", "platform"},
			wantOut: []string{"rules"},
		},
		"OtherCluster": {
			reason:  "On another cluster the source config decides, and no namespace here is kept from being a target.",
			tgt:     &target.Cluster{ID: "local", Config: &rest.Config{Host: "https://10.0.0.1:6443"}, Reach: writes},
			src:     remote(),
			srcNSs:  []string{"platform", "team-a"},
			wantOut: []string{"team-a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			check, notTargets := sourceReach(context.Background(), tc.tgt, tc.src, "rules", tc.srcNSs, nss)
			var out []string
			for _, ns := range tc.srcNSs {
				if err := check(ns); err != nil {
					if !reach.IsOutOfReach(err) {
						t.Fatalf("%s\ncheck(%q): %v", tc.reason, ns, err)
					}
					out = append(out, ns)
				}
			}
			if diff := cmp.Diff(tc.wantOut, out); diff != "" {
				t.Errorf("%s\nout of reach: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantNotTargets, notTargets); diff != "" {
				t.Errorf("%s\nnot targets: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
