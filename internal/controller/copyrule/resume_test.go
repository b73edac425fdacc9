package copyrule

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
)

func resumeInputs() Inputs {
	return Inputs{
		Generation: 3,
		Clusters:   []string{"local", "local"},
		Reach:      reachKey(reach.Policy{Config: `ClusterProviderConfig "default"`, Namespaces: []string{"team-*"}}),
		Sources:    []Version{{"src", "a", "uid-a", "10"}, {"src", "b", "uid-b", "11"}},
		Copies:     []Version{{"t1", "a", "uid-c1", "20"}, {"t2", "a", "uid-c2", "21"}, {"t1", "b", "uid-c3", "22"}, {"t2", "b", "uid-c4", "23"}},
		Targets:    Targets{Namespaces: []string{"t1", "t2"}},
	}
}

// The digest is what a restarted rule trusts instead of reading: any change
// of what it decided from must change it, and nothing else may.
func TestInputsDigest(t *testing.T) {
	base := resumeInputs().Digest()
	cases := map[string]struct {
		reason string
		change func(*Inputs)
		same   bool
	}{
		"ListsReordered": {reason: "The order sources, copies and targets were read in does not matter.", same: true, change: func(in *Inputs) {
			in.Sources[0], in.Sources[1] = in.Sources[1], in.Sources[0]
			in.Copies[0], in.Copies[3] = in.Copies[3], in.Copies[0]
			in.Targets.Namespaces = []string{"t2", "t1"}
		}},
		"Generation":      {reason: "A new spec may plan differently.", change: func(in *Inputs) { in.Generation++ }},
		"SourceVersion":   {reason: "A source written since has other content.", change: func(in *Inputs) { in.Sources[1].ResourceVersion = "12" }},
		"SourceRecreated": {reason: "A source deleted and made again is another object.", change: func(in *Inputs) { in.Sources[0].UID = "uid-a2" }},
		"SourceGone":      {reason: "A source deleted: its copies go.", change: func(in *Inputs) { in.Sources = in.Sources[:1] }},
		"SourceNew":       {reason: "A new source selected: its copies are made.", change: func(in *Inputs) { in.Sources = append(in.Sources, Version{"src", "c", "uid-x", "30"}) }},
		"CopyEdited":      {reason: "A copy someone edited is repaired.", change: func(in *Inputs) { in.Copies[2].ResourceVersion = "99" }},
		"CopyGone":        {reason: "A copy someone deleted is made again.", change: func(in *Inputs) { in.Copies = in.Copies[1:] }},
		"CopyMoved":       {reason: "The same versions in other places are not the same copies.", change: func(in *Inputs) { in.Copies[0].Namespace, in.Copies[1].Namespace = "t2", "t1" }},
		"TargetNew":       {reason: "A namespace selected since gets copies.", change: func(in *Inputs) { in.Targets.Namespaces = append(in.Targets.Namespaces, "t3") }},
		"TargetMissing":   {reason: "A named namespace missing is a problem to report.", change: func(in *Inputs) { in.Targets.Missing = []string{"t9"} }},
		"Cluster":         {reason: "Another cluster or credentials: the watches are not the same.", change: func(in *Inputs) { in.Clusters[1] = "remote" }},
		"Reach": {reason: "A reach changed decides other prunes.", change: func(in *Inputs) {
			in.Reach = reachKey(reach.Policy{Config: `ClusterProviderConfig "default"`, Namespaces: []string{"team-*"}, Selector: labels.Everything()})
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := resumeInputs()
			tc.change(&in)
			if got := in.Digest() == base; got != tc.same {
				t.Errorf("%s\nDigest() equal to before: %t, want %t", tc.reason, got, tc.same)
			}
		})
	}
}

// A rule decides from its digest after a provider start, after waiting for
// its watches for at most maxResumeWait, however often; for a while after, late events
// may too; once the while is over, or once it read, it reads. What is kept of
// it goes with it.
func TestResumesOncePerStart(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	k := newKnownCopies()
	r := Owner{UID: "uid-r", Namespace: "ns", Name: "r"}
	uid := types.UID(r.UID)
	// However many reconciles wait (each watch synced, each event of
	// their first lists), within the bound.
	for i := range 10 {
		at := now.Add(time.Duration(i) * maxResumeWait / 10)
		if !k.resuming(uid, at) || !k.waited(uid, at) {
			t.Fatalf("wait %d, %v after the first: the rule may not wait for its watches", i+1, at.Sub(now))
		}
	}
	if !k.resuming(uid, now.Add(maxResumeWait)) || k.waited(uid, now.Add(maxResumeWait)) {
		t.Fatalf("%v after its first wait, the rule still waits: it must read", maxResumeWait)
	}
	k.resumed(r, now.Add(time.Minute))
	if !k.resuming(uid, now.Add(30*time.Second)) {
		t.Error("a late event right after the rule resumed may not decide from its digest")
	}
	k.resumed(r, now.Add(time.Hour))
	if k.resuming(uid, now.Add(2*time.Minute)) {
		t.Error("deciding from the digest again extended the while: a poll would never read")
	}
	if k.waited(uid, now) {
		t.Error("a rule that decided waits for its watches again")
	}
	k.resumed(r, time.Time{})
	if k.resuming(uid, now) {
		t.Error("a rule that read resumes from its digest: its later reconciles must read")
	}

	// One that read first never decides from its digest.
	o := Owner{UID: "uid-o", Namespace: "ns", Name: "o"}
	k.resumed(o, time.Time{})
	k.resumed(o, now.Add(time.Hour))
	if k.resuming(types.UID(o.UID), now) {
		t.Error("a rule that read decides from its digest later")
	}

	k.forget(types.NamespacedName{Namespace: "ns", Name: "r"})
	k.forget(types.NamespacedName{Namespace: "ns", Name: "o"})
	if len(k.resumes) != 0 || len(k.uids) != 0 {
		t.Errorf("after forgetting the rules: %v, %v; want nothing", k.resumes, k.uids)
	}
}

// A rule that waits for its watches is reconciled again when its wait ends,
// not at its poll: a watch whose list is refused never syncs and never
// enqueues it. Before it waited, and once it decided, its poll stands.
func TestResumingRuleIsReconciledWhenItsWaitEnds(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	poll := time.Hour
	cases := map[string]struct {
		state func(k *knownCopies, r Owner)
		want  time.Duration
	}{
		"NeverWaited": {state: func(*knownCopies, Owner) {}, want: poll},
		"StartedWaitingNow": {
			state: func(k *knownCopies, r Owner) { k.waited(types.UID(r.UID), now) },
			want:  maxResumeWait,
		},
		"WaitedAWhile": {
			state: func(k *knownCopies, r Owner) { k.waited(types.UID(r.UID), now.Add(-maxResumeWait/4)) },
			want:  maxResumeWait * 3 / 4,
		},
		"WaitOverButNotReconciledYet": {
			state: func(k *knownCopies, r Owner) { k.waited(types.UID(r.UID), now.Add(-2*maxResumeWait)) },
			want:  10 * time.Millisecond,
		},
		"ResumedFromItsDigest": {
			state: func(k *knownCopies, r Owner) {
				k.waited(types.UID(r.UID), now)
				k.resumed(r, now.Add(time.Minute))
			},
			want: poll,
		},
		"Read": {
			state: func(k *knownCopies, r Owner) {
				k.waited(types.UID(r.UID), now)
				k.resumed(r, time.Time{})
			},
			want: poll,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k := newKnownCopies()
			cr := &v1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", UID: "uid-r"}}
			tc.state(k, owner(cr))
			if got := untilWaitEnds(k, func() time.Time { return now })(cr, poll); got != tc.want {
				t.Errorf("next reconcile in %v, want %v", got, tc.want)
			}
		})
	}
}
