package configrollout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
)

func TestFollowingValues(t *testing.T) {
	cr := rollout()
	cr.Status.AtProvider.Workloads = []v1alpha1.RolledWorkload{
		{Kind: KindDeployment, Name: "followed", Hash: "h", Baseline: true},
		{Kind: KindDeployment, Name: "rolled", Hash: "h"},
		{Kind: KindCronJob, Name: "nightly", Hash: "h", Baseline: true},
		{Kind: KindDeployment, Name: "toroll"},
	}
	want := []string{"Deployment/followed", "Deployment/rolled", "CronJob/nightly"}
	if diff := cmp.Diff(want, followingValues(cr)); diff != "" {
		t.Errorf("followingValues(...): the workloads the status holds, by a baseline or a roll, not one still to roll: -want, +got:\n%s", diff)
	}
}

func TestFirstFollowsTheOlderRollout(t *testing.T) {
	at := func(name string, d time.Duration) *v1alpha1.ConfigRollout {
		cr := rollout()
		cr.SetName(name)
		cr.SetCreationTimestamp(metav1.NewTime(testNow.Add(d)))
		return cr
	}
	cases := map[string]struct {
		reason string
		a, b   *v1alpha1.ConfigRollout
		want   bool
	}{
		"Older":      {reason: "The older rollout follows a workload.", a: at("z", 0), b: at("a", time.Second), want: true},
		"Newer":      {reason: "The newer one does not.", a: at("a", time.Second), b: at("z", 0), want: false},
		"SameSecond": {reason: "Of two made in one second, the first by name.", a: at("a", 0), b: at("b", 0), want: true},
		"ByNameLast": {reason: "Of two made in one second, the last by name does not.", a: at("b", 0), b: at("a", 0), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := first(tc.a, tc.b); got != tc.want {
				t.Errorf("\n%s\nfirst(%s, %s) = %t, want %t", tc.reason, tc.a.GetName(), tc.b.GetName(), got, tc.want)
			}
		})
	}
}

func TestRunsTakesANewWorkloadsHashAsBaseline(t *testing.T) {
	type want struct {
		carried           string
		baseline, adopted bool
	}
	followed := v1alpha1.RolledWorkload{Kind: KindDeployment, Name: "api", Hash: "old", Baseline: true}
	rolled := v1alpha1.RolledWorkload{Kind: KindDeployment, Name: "api", Hash: "old"}
	cases := map[string]struct {
		reason   string
		template string
		ours     bool
		rec      v1alpha1.RolledWorkload
		adopt    bool
		want     want
	}{
		"New":            {reason: "A workload the rollout starts to follow runs the current configuration, as its baseline.", template: "", adopt: true, want: want{carried: "want", baseline: true, adopted: true}},
		"NewOtherHash":   {reason: "So does one whose template carries a hash it did not write.", template: "foreign", adopt: true, want: want{carried: "want", baseline: true, adopted: true}},
		"NewNoAdopt":     {reason: "With rollOnAdoption (or a source missing) it runs what its template says, to be rolled.", template: "foreign", want: want{carried: "foreign"}},
		"Current":        {reason: "A template that carries the current hash is current, whatever else.", template: "want", adopt: true, want: want{carried: "want"}},
		"CarriesAll":     {reason: "So is one that carries the hash of every source together.", template: "all", rec: followed, want: want{carried: "all"}},
		"Ours":           {reason: "A template this rollout rolled runs what it carries.", template: "old", ours: true, rec: followed, adopt: true, want: want{carried: "old"}},
		"Followed":       {reason: "A followed workload runs its baseline until it is rolled.", template: "", rec: followed, adopt: true, want: want{carried: "old", baseline: true}},
		"FollowedNoRoll": {reason: "Its baseline holds without adopt too: turning rollOnAdoption on rolls nothing by itself.", template: "foreign", rec: followed, want: want{carried: "old", baseline: true}},
		"LostLock":       {reason: "A workload this rollout rolled and whose lock is gone is not adopted again: it runs what its template carries, to be rolled.", template: "old", rec: rolled, adopt: true, want: want{carried: "old"}},
		"LostLockHash":   {reason: "One whose hash is gone too was restarted by that replace: it runs what was recorded, to be rolled.", template: "", rec: rolled, adopt: true, want: want{carried: "old"}},
		"LostLockKept":   {reason: "Such a workload recorded at the current hash runs it: a replace alone rolls nothing.", template: "", rec: v1alpha1.RolledWorkload{Hash: "want"}, adopt: true, want: want{carried: "want"}},
		"LostLockOther":  {reason: "One whose template carries another hash runs that one.", template: "foreign", rec: rolled, adopt: true, want: want{carried: "foreign"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, b, a := runs(tc.template, tc.ours, tc.rec, "want", "all", tc.adopt)
			if diff := cmp.Diff(tc.want, want{c, b, a}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nruns(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzRuns: a workload the rollout starts to follow is never to be rolled
// unless rollOnAdoption asks; a workload the status records, as rolled or as
// a baseline, is never adopted again, and one it rolled whose lock is gone
// is to be rolled on a change; a workload is to be rolled only when what it
// runs is not the current configuration.
func FuzzRuns(f *testing.F) {
	f.Add("", false, "", false, "w", "a", true)
	f.Add("w", true, "old", true, "w", "a", false)
	f.Add("old", false, "old", false, "new", "all", true)
	f.Add("", false, "old", false, "new", "all", true)
	f.Fuzz(func(t *testing.T, template string, ours bool, recHash string, recBaseline bool, want, all string, adopt bool) {
		if want == "" {
			return
		}
		rec := v1alpha1.RolledWorkload{Hash: recHash, Baseline: recBaseline}
		recorded, rolled := recHash != "" || recBaseline, recHash != "" && !recBaseline
		carried, baseline, adopted := runs(template, ours, rec, want, all, adopt)
		pending := !upToDate(carried, want, all)
		if adopted && (pending || !adopt || ours || recorded) {
			t.Errorf("runs(%q, %t, %+v, %q, %q, %t) adopted it: carried %q, to roll %t", template, ours, rec, want, all, adopt, carried, pending)
		}
		if adopt && !ours && !recorded && pending {
			t.Errorf("runs(%q, %t, %+v, %q, %q, %t): a workload started to follow is to be rolled", template, ours, rec, want, all, adopt)
		}
		if rolled && baseline {
			t.Errorf("runs(%q, %t, %+v, %q, %q, %t): a workload it rolled is a baseline again", template, ours, rec, want, all, adopt)
		}
		changed := !upToDate(recHash, want, all) && !upToDate(template, want, all)
		if rolled && (template == "" || template == recHash) && changed && !pending {
			t.Errorf("runs(%q, %t, %+v, %q, %q, %t): a change after its lock was lost rolls nothing", template, ours, rec, want, all, adopt)
		}
		if baseline && carried != want && carried != recHash {
			t.Errorf("runs(...) baseline %q is neither the recorded one nor the current one", carried)
		}
	})
}

// held is a rollout made at testNow plus d whose status records Deployment
// api as rec.
func held(name string, d time.Duration, rec *v1alpha1.RolledWorkload) *v1alpha1.ConfigRollout {
	cr := rollout()
	cr.SetName(name)
	cr.SetCreationTimestamp(metav1.NewTime(testNow.Add(d)))
	if rec != nil {
		r := *rec
		r.Kind, r.Name = KindDeployment, "api"
		cr.Status.AtProvider.Workloads = []v1alpha1.RolledWorkload{r}
	}
	return cr
}

func TestKeepsAWorkloadTheRolloutRolled(t *testing.T) {
	rolled := &v1alpha1.RolledWorkload{Hash: "h"}
	base := &v1alpha1.RolledWorkload{Hash: "h", Baseline: true}
	toRoll := &v1alpha1.RolledWorkload{}
	cases := map[string]struct {
		reason string
		a, b   *v1alpha1.ConfigRollout
		want   bool // a keeps the workload from b
	}{
		"RolledKeepsFromOlder":    {reason: "A workload a rollout rolled is its own, as by a lock, though the other is older.", a: held("new", time.Second, rolled), b: held("old", 0, nil), want: true},
		"RolledKeepsFromBaseline": {reason: "A roll beats an older rollout's baseline: the lost-lock window's adoption.", a: held("new", time.Second, rolled), b: held("old", 0, base), want: true},
		"BaselineYieldsToRolled":  {reason: "The baseline of an older rollout does not keep a workload another rolled.", a: held("old", 0, base), b: held("new", time.Second, rolled), want: false},
		"OlderBaselineKeeps":      {reason: "Of two baselines, the older keeps the workload.", a: held("old", 0, base), b: held("new", time.Second, base), want: true},
		"NewerBaselineYields":     {reason: "The newer baseline yields.", a: held("new", time.Second, base), b: held("old", 0, nil), want: false},
		"OlderRolledKeeps":        {reason: "Of two rolls (a race), the older keeps the workload.", a: held("old", 0, rolled), b: held("new", time.Second, rolled), want: true},
		"NewerRolledYields":       {reason: "Of two rolls, the newer yields.", a: held("new", time.Second, rolled), b: held("old", 0, rolled), want: false},
		"ToRollHoldsNothing":      {reason: "An entry still to roll is no roll: the older rollout that rolled it keeps it.", a: held("old", 0, rolled), b: held("new", time.Second, toRoll), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := keeps(tc.a, tc.b, "Deployment/api", rolledBy(tc.b, "Deployment/api"))
			if got != tc.want {
				t.Errorf("\n%s\nkeeps(%s, %s) = %t, want %t", tc.reason, tc.a.GetName(), tc.b.GetName(), got, tc.want)
			}
			// Two rollouts that both hold it agree on which keeps it.
			if bHeld := len(followingValues(tc.b)) > 0; bHeld {
				if back := keeps(tc.b, tc.a, "Deployment/api", rolledBy(tc.a, "Deployment/api")); back == got {
					t.Errorf("\n%s\nkeeps(%s, %s) = keeps(%s, %s) = %t: exactly one keeps it", tc.reason, tc.a.GetName(), tc.b.GetName(), tc.b.GetName(), tc.a.GetName(), got)
				}
			}
		})
	}
}

// TestFollowedBy: a workload whose lock was lost stays the rollout's that
// rolled it, found through indexFollowing in the cache of every rollout
// (full or slim), so no other rollout of the namespace takes it as a
// baseline.
func TestFollowedBy(t *testing.T) {
	rolled := &v1alpha1.RolledWorkload{Hash: "h"}
	base := &v1alpha1.RolledWorkload{Hash: "h", Baseline: true}
	api := workload{Kind: KindDeployment, Name: "api", Template: &corev1.PodTemplateSpec{}}
	cases := map[string]struct {
		reason string
		others []*v1alpha1.ConfigRollout
		cr     *v1alpha1.ConfigRollout
		lock   string
		want   string
	}{
		"LostLockRolledByOlder": {
			reason: "Without a lock, a workload an older rollout rolled is that rollout's.",
			others: []*v1alpha1.ConfigRollout{held("first", 0, rolled)},
			cr:     held("second", time.Second, nil),
			want:   "first",
		},
		"LostLockRolledByNewer": {
			reason: "A workload a newer rollout rolled is that one's too: a roll holds as a lock does.",
			others: []*v1alpha1.ConfigRollout{held("second", time.Second, rolled)},
			cr:     held("first", 0, nil),
			want:   "second",
		},
		"BaselineTakenInTheWindow": {
			reason: "The rollout that rolled it keeps it against a baseline taken while the lock was lost.",
			others: []*v1alpha1.ConfigRollout{held("first", 0, base)},
			cr:     held("second", time.Second, rolled),
			want:   "",
		},
		"OlderBaseline": {
			reason: "Of rollouts that only follow it, the older follows it, as before.",
			others: []*v1alpha1.ConfigRollout{held("first", 0, base)},
			cr:     held("second", time.Second, nil),
			want:   "first",
		},
		"NewerBaseline": {
			reason: "A newer rollout's baseline does not keep it from an older one.",
			others: []*v1alpha1.ConfigRollout{held("second", time.Second, base)},
			cr:     held("first", 0, nil),
			want:   "",
		},
		"ToRoll": {
			reason: "A rollout that has only still to roll it holds nothing.",
			others: []*v1alpha1.ConfigRollout{held("first", 0, &v1alpha1.RolledWorkload{})},
			cr:     held("second", time.Second, nil),
			want:   "",
		},
		"Deleted": {
			reason: "A rollout on its way out holds nothing.",
			others: []*v1alpha1.ConfigRollout{func() *v1alpha1.ConfigRollout {
				cr := held("first", 0, rolled)
				cr.SetDeletionTimestamp(&metav1.Time{Time: testNow})
				cr.SetFinalizers([]string{"f"})
				return cr
			}()},
			cr:   held("second", time.Second, nil),
			want: "",
		},
		"OwnLock": {
			reason: "Its own lock keeps it whatever others record.",
			others: []*v1alpha1.ConfigRollout{held("first", 0, rolled)},
			cr:     held("second", time.Second, nil),
			lock:   "second",
			want:   "",
		},
	}
	for name, tc := range cases {
		for _, slim := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/slim=%t", name, slim), func(t *testing.T) {
				b := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&v1alpha1.ConfigRollout{}, indexFollowing, followingValues)
				for _, o := range append(slices.Clone(tc.others), tc.cr) {
					var obj client.Object = o.DeepCopy()
					if slim {
						s, _ := SlimRollout(obj)
						// The fake refuses a deleted object without them.
						s.(client.Object).SetFinalizers(obj.GetFinalizers())
						obj = s.(client.Object)
					}
					b = b.WithObjects(obj)
				}
				e := &external{rollouts: b.Build(), cluster: &target.Cluster{}}
				w := api
				w.Lock = tc.lock
				rec := v1alpha1.RolledWorkload{}
				if ws := tc.cr.Status.AtProvider.Workloads; len(ws) > 0 {
					rec = ws[0]
				}
				got, err := e.followedBy(context.Background(), tc.cr, w, rec)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Errorf("\n%s\nfollowedBy(...) = %q, want %q", tc.reason, got, tc.want)
				}
			})
		}
	}
}

// FuzzKeeps: of two rollouts whose statuses both hold one workload, by a
// roll or a baseline, exactly one keeps it, whatever their ages and names.
func FuzzKeeps(f *testing.F) {
	f.Add(true, false, int8(0), int8(1), "a", "b")
	f.Add(true, true, int8(1), int8(1), "b", "a")
	f.Fuzz(func(t *testing.T, aRolled, bRolled bool, aAge, bAge int8, aName, bName string) {
		if aName == bName {
			return
		}
		rec := func(rolled bool) *v1alpha1.RolledWorkload {
			return &v1alpha1.RolledWorkload{Hash: "h", Baseline: !rolled}
		}
		a := held(aName, time.Duration(aAge)*time.Second, rec(aRolled))
		b := held(bName, time.Duration(bAge)*time.Second, rec(bRolled))
		const key = "Deployment/api"
		ab, ba := keeps(a, b, key, bRolled), keeps(b, a, key, aRolled)
		if ab == ba {
			t.Errorf("keeps(a, b) = keeps(b, a) = %t for a %+v, b %+v: exactly one keeps it", ab, a.Status.AtProvider.Workloads, b.Status.AtProvider.Workloads)
		}
		if aRolled != bRolled && ab != aRolled {
			t.Errorf("keeps(a, b) = %t with a rolled %t, b rolled %t: the roll keeps it", ab, aRolled, bRolled)
		}
	})
}
