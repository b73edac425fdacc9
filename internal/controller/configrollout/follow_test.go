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
