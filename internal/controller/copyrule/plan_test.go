package copyrule

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

var rule = Owner{UID: "uid-1", Namespace: "platform", Name: "share"}

func source(name string, data map[string]string, immutable bool) Object {
	return Object{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: name, Labels: map[string]string{"app": "x"}}, Data: data, Immutable: immutable}
}

// inSync is the copy of src in ns as the rule writes it.
func inSync(src Object, ns string) Object {
	c := Desired(rule, src, Hash(src), ns, nil, false)
	c.UID = "copy-uid"
	return c
}

func TestHashCoversContentNotOwnership(t *testing.T) {
	a := source("a", map[string]string{"k": "v", "j": "w"}, false)
	cases := map[string]struct {
		reason string
		x, y   Object
		equal  bool
	}{
		"OwnershipLabelIgnored": {reason: "The ownership label is not content.", x: a, y: inSync(a, "team"), equal: true},
		"DataDiffers":           {reason: "Other data, other hash.", x: a, y: source("a", map[string]string{"k": "v2", "j": "w"}, false)},
		"ImmutableDiffers":      {reason: "Immutability is content.", x: a, y: source("a", a.Data, true)},
		"LabelsDiffer": {reason: "Labels are copied, so they are content.", x: a, y: func() Object {
			b := a
			b.Labels = map[string]string{"app": "y"}
			return b
		}()},
		"EmptyEqualsNil": {reason: "An empty map and a missing one are the same content.", x: Object{Data: map[string]string{}}, y: Object{}, equal: true},
		"InvalidUTF8Differs": {reason: "Data that is not valid UTF-8 is hashed as bytes, not as JSON would replace it.",
			x: source("a", map[string]string{"k": "\xff"}, false), y: source("a", map[string]string{"k": "\xfe"}, false)},
		"InvalidUTF8KeysDiffer": {reason: "So are keys.",
			x: source("a", map[string]string{"\xff": "v", "j": "w"}, false), y: source("a", map[string]string{"\xfe": "v", "j": "w"}, false)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Hash(tc.x) == Hash(tc.y); got != tc.equal {
				t.Errorf("%s\nHash(x) == Hash(y): got %t, want %t", tc.reason, got, tc.equal)
			}
		})
	}
}

// TestHashStable pins the hash of valid data: copies carry it, and a hash
// that changed across versions would rewrite every copy on upgrade.
func TestHashStable(t *testing.T) {
	got := Hash(source("a", map[string]string{"k": "v", "j": "w"}, false))
	if want := "502fa00cb52e405fb3fb2c6826f20708"; got != want {
		t.Errorf("Hash: got %s, want %s", got, want)
	}
}

func TestMakePlan(t *testing.T) {
	a := source("a", map[string]string{"k": "v"}, false)
	imm := source("imm", map[string]string{"k": "v2"}, true)
	drifted := inSync(a, "team-b")
	drifted.Data = map[string]string{"k": "edited"}
	oldImm := inSync(source("imm", map[string]string{"k": "v1"}, true), "team-a")
	stale := inSync(source("gone", map[string]string{"g": "1"}, false), "team-a")
	taken := inSync(source("gone2", nil, false), "team-a")
	taken.Annotations[AnnotationTakenOver] = "true"
	theirs := Object{ObjectMeta: metav1.ObjectMeta{Namespace: "team-c", Name: "a", Annotations: map[string]string{"their": "note"}}, Data: map[string]string{"k": "other"}}
	reachable := func(string) error { return nil }

	type summary struct {
		Ops      map[Op][]string
		Intended int
		InSync   int
		Skipped  int
		Problems []string
	}
	sum := func(p Plan) summary {
		s := summary{Ops: map[Op][]string{}, Intended: p.Intended, InSync: p.InSync, Skipped: p.Skipped}
		for _, a := range p.Actions {
			s.Ops[a.Op] = append(s.Ops[a.Op], a.Object.Namespace+"/"+a.Object.Name)
		}
		for _, pr := range p.Problems {
			s.Problems = append(s.Problems, pr.Reason+" "+pr.Namespace+"/"+pr.Name)
		}
		return s
	}
	cases := map[string]struct {
		reason string
		in     PlanInput
		want   summary
	}{
		"Converged": {
			reason: "Copies equal to their sources need no write.",
			in:     PlanInput{Sources: []Object{a}, Targets: Targets{Namespaces: []string{"team-a", "team-b"}}, Copies: []Object{inSync(a, "team-a"), inSync(a, "team-b")}},
			want:   summary{Ops: map[Op][]string{}, Intended: 2, InSync: 2},
		},
		"CreateUpdateReplace": {
			reason: "Missing copies are created, drifted ones updated, immutable ones replaced.",
			in:     PlanInput{Sources: []Object{a, imm}, Targets: Targets{Namespaces: []string{"team-a", "team-b"}}, Copies: []Object{drifted, oldImm}},
			want: summary{Ops: map[Op][]string{
				OpCreate:  {"team-a/a", "team-b/imm"},
				OpUpdate:  {"team-b/a"},
				OpReplace: {"team-a/imm"},
			}, Intended: 4},
		},
		"PruneAndRelease": {
			reason: "Copies no longer wanted are deleted if the rule made them, released if it took them over.",
			in:     PlanInput{Sources: []Object{a}, Targets: Targets{Namespaces: []string{"team-a"}}, Copies: []Object{inSync(a, "team-a"), stale, taken}, MayDelete: true},
			want:   summary{Ops: map[Op][]string{OpPrune: {"team-a/gone"}, OpRelease: {"team-a/gone2"}}, Intended: 1, InSync: 1},
		},
		"NoDeletePolicy": {
			reason: "Without Delete in the management policies nothing is pruned; it is reported.",
			in:     PlanInput{Sources: []Object{a}, Targets: Targets{Namespaces: []string{"team-a"}}, Copies: []Object{inSync(a, "team-a"), stale}},
			want:   summary{Ops: map[Op][]string{}, Intended: 1, InSync: 1, Problems: []string{"PruneSkipped team-a/gone"}},
		},
		"PruneOutOfReach": {
			reason: "A copy in a namespace the rule may no longer reach is left in place and reported.",
			in:     PlanInput{Sources: []Object{a}, Copies: []Object{stale}, MayDelete: true, Reachable: func(string) error { return errors.New("denied") }},
			want:   summary{Ops: map[Op][]string{}, Problems: []string{"OutOfReach team-a/gone"}},
		},
		"ConflictSkip": {
			reason: "Someone else's object is left alone under Skip.",
			in:     PlanInput{Sources: []Object{a}, Targets: Targets{Namespaces: []string{"team-c"}}, Occupied: map[Ref]Object{{"team-c", "a"}: theirs}, Policy: v1alpha1.ConflictSkip},
			want:   summary{Ops: map[Op][]string{}, Intended: 1, Skipped: 1, Problems: []string{"Conflict team-c/a"}},
		},
		"ConflictAdoptDiffers": {
			reason: "Adopt does not take over an object with other data.",
			in:     PlanInput{Sources: []Object{a}, Targets: Targets{Namespaces: []string{"team-c"}}, Occupied: map[Ref]Object{{"team-c", "a"}: theirs}, Policy: v1alpha1.ConflictAdopt},
			want:   summary{Ops: map[Op][]string{}, Intended: 1, Skipped: 1, Problems: []string{"Conflict team-c/a"}},
		},
		"ConflictOverwrite": {
			reason: "Overwrite takes the object over.",
			in:     PlanInput{Sources: []Object{a}, Targets: Targets{Namespaces: []string{"team-c"}}, Occupied: map[Ref]Object{{"team-c", "a"}: theirs}, Policy: v1alpha1.ConflictOverwrite},
			want:   summary{Ops: map[Op][]string{OpUpdate: {"team-c/a"}}, Intended: 1},
		},
		"OutOfReachAndMissing": {
			reason: "Listed namespaces out of reach count as intended and skipped; missing ones are reported only.",
			in:     PlanInput{Sources: []Object{a}, Targets: Targets{OutOfReach: map[string]string{"kube-system": "denied"}, Missing: []string{"team-new"}}},
			want:   summary{Ops: map[Op][]string{}, Intended: 1, Skipped: 1, Problems: []string{"OutOfReach kube-system/a", "NamespaceMissing team-new/a"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Owner = rule
			if tc.in.Reachable == nil {
				tc.in.Reachable = reachable
			}
			if diff := cmp.Diff(tc.want, sum(MakePlan(tc.in)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nMakePlan(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestConflictFollowsThePolicy(t *testing.T) {
	a := source("a", map[string]string{"k": "v"}, false)
	same := Object{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", Labels: map[string]string{"mine": "yes"}, Annotations: map[string]string{"note": "keep"}, Finalizers: []string{"keep/me"}}, Data: map[string]string{"k": "v"}}
	sameImmutable := same
	sameImmutable.Immutable = true
	other := same
	other.Data = map[string]string{"k": "mine"}
	cases := map[string]struct {
		reason  string
		policy  v1alpha1.ConflictPolicy
		o       Object
		wantOp  Op
		problem bool
	}{
		"SkipIdentical":      {reason: "Skip never takes over.", policy: v1alpha1.ConflictSkip, o: same, problem: true},
		"AdoptIdentical":     {reason: "Adopt takes over identical data.", policy: v1alpha1.ConflictAdopt, o: same, wantOp: OpUpdate},
		"AdoptOther":         {reason: "Adopt leaves other data.", policy: v1alpha1.ConflictAdopt, o: other, problem: true},
		"AdoptImmutable":     {reason: "An immutable object cannot become mutable in place.", policy: v1alpha1.ConflictAdopt, o: sameImmutable, problem: true},
		"OverwriteOther":     {reason: "Overwrite updates other data in place.", policy: v1alpha1.ConflictOverwrite, o: other, wantOp: OpUpdate},
		"OverwriteImmutable": {reason: "Overwrite replaces an immutable object.", policy: v1alpha1.ConflictOverwrite, o: sameImmutable, wantOp: OpReplace},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			act, problem := Conflict(rule, tc.policy, a, Hash(a), tc.o)
			if (problem != "") != tc.problem {
				t.Fatalf("%s\nConflict(...): problem %q, want problem %t", tc.reason, problem, tc.problem)
			}
			if tc.problem {
				return
			}
			if act.Op != tc.wantOp {
				t.Errorf("%s\nConflict(...): op %q, want %q", tc.reason, act.Op, tc.wantOp)
			}
			// What is taken over is marked so, and keeps what others set.
			if !TakenOver(act.Object) || !OwnedBy(rule, act.Object) {
				t.Errorf("%s\nConflict(...): object not marked as taken over by the rule: %v", tc.reason, act.Object.ObjectMeta)
			}
			if act.Op == OpUpdate && (act.Object.Annotations["note"] != "keep" || len(act.Object.Finalizers) != 1) {
				t.Errorf("%s\nConflict(...): others' metadata lost: %v", tc.reason, act.Object.ObjectMeta)
			}
			if !InSync(rule, a, Hash(a), act.Object) {
				t.Errorf("%s\nConflict(...): the written object would not be in sync", tc.reason)
			}
		})
	}
}

func TestReleasedDropsTheRulesMarks(t *testing.T) {
	c := inSync(source("a", nil, false), "team")
	c.Annotations[AnnotationTakenOver] = "true"
	c.Annotations["note"] = "keep"
	r := Released(c)
	if OwnedBy(rule, r) || TakenOver(r) || r.Annotations[AnnotationRule] != "" || r.Annotations["note"] != "keep" {
		t.Errorf("Released(...): %v", r.ObjectMeta)
	}
	if !OwnedBy(rule, c) {
		t.Error("Released(...) changed its argument")
	}
}

func TestPlanDrift(t *testing.T) {
	a := source("a", map[string]string{"k": "v", "tls.crt": "x"}, false)
	secret := Object{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "s"}, Bytes: map[string][]byte{"password": []byte("p")}, Type: "Opaque"}
	edit := func(src Object, f func(c *Object)) Object {
		c := inSync(src, "team")
		f(&c)
		return c
	}
	cases := map[string]struct {
		reason string
		src    Object
		copy   Object
		synced bool
		want   []string
	}{
		"DataEdited": {
			reason: "A copy whose data another writer changed drifted at that key, never its value.",
			src:    a, synced: true,
			copy: edit(a, func(c *Object) { c.Data = map[string]string{"k": "v", "tls.crt": "edited"} }),
			want: []string{"data[tls.crt]"},
		},
		"SecretKeyAdded": {
			reason: "A Secret's keys are its data; a key another writer added drifted.",
			src:    secret, synced: true,
			copy: edit(secret, func(c *Object) { c.Bytes = map[string][]byte{"password": []byte("p"), "extra": []byte("e")} }),
			want: []string{"data.extra"},
		},
		"MarksRemoved": {
			reason: "A label and an annotation of the rule removed drifted too.",
			src:    a, synced: true,
			copy: edit(a, func(c *Object) {
				delete(c.Labels, "app")
				delete(c.Annotations, AnnotationSource)
			}),
			want: []string{"metadata.annotations[copy.clusterops.io/source]", "metadata.labels.app"},
		},
		"SourceChanged": {
			reason: "A copy written for other content follows its source: no drift.",
			src:    source("a", map[string]string{"k": "new"}, false), synced: true,
			copy: inSync(a, "team"),
		},
		"NotSynced": {
			reason: "A rule not in sync at its current spec cannot tell drift from its own change.",
			src:    a,
			copy:   edit(a, func(c *Object) { c.Data = map[string]string{"k": "edited"} }),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := MakePlan(PlanInput{
				Owner: rule, Sources: []Object{tc.src}, Targets: Targets{Namespaces: []string{"team"}},
				Copies: []Object{tc.copy}, MayDelete: true, Reachable: func(string) error { return nil },
				Transform: NewTransform(v1alpha1.CopyRuleParameters{}), Synced: tc.synced,
			})
			if len(p.Actions) != 1 {
				t.Fatalf("%s\nwant one write, got %+v", tc.reason, p.Actions)
			}
			if diff := cmp.Diff(tc.want, p.Actions[0].Drift); diff != "" {
				t.Errorf("%s\nDrift: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
