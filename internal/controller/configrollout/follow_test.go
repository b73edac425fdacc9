package configrollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

func TestFollowingValues(t *testing.T) {
	cr := rollout()
	cr.Status.AtProvider.Workloads = []v1alpha1.RolledWorkload{
		{Kind: KindDeployment, Name: "followed", Hash: "h", Baseline: true},
		{Kind: KindDeployment, Name: "rolled", Hash: "h"},
		{Kind: KindCronJob, Name: "nightly", Hash: "h", Baseline: true},
	}
	want := []string{"Deployment/followed", "CronJob/nightly"}
	if diff := cmp.Diff(want, followingValues(cr)); diff != "" {
		t.Errorf("followingValues(...): only the workloads followed without a lock: -want, +got:\n%s", diff)
	}
}

func TestFirst(t *testing.T) {
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

func TestRuns(t *testing.T) {
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
