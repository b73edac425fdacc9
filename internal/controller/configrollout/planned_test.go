package configrollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

func TestRollReason(t *testing.T) {
	p := workloadv1alpha1.ConfigRolloutParameters{
		ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf", Keys: []string{"a", "b"}}},
		Secrets:    []workloadv1alpha1.SourceRef{{Name: "creds"}},
	}
	src := func(kind, name, hash string) workloadv1alpha1.SourceHash {
		return workloadv1alpha1.SourceHash{Kind: kind, Name: name, Hash: hash}
	}
	before := []workloadv1alpha1.SourceHash{src(KindConfigMap, "conf", "1"), src(KindSecret, "creds", "1")}
	cases := map[string]struct {
		reason  string
		now     []workloadv1alpha1.SourceHash
		before  []workloadv1alpha1.SourceHash
		why     string
		changed bool
	}{
		"OneChanged": {
			reason: "The source that changed is named, with the keys that count.",
			before: before, now: []workloadv1alpha1.SourceHash{src(KindConfigMap, "conf", "2"), src(KindSecret, "creds", "1")},
			why: "ConfigMap conf changed (keys a, b)", changed: true,
		},
		"BothChanged": {
			reason: "Every changed source is named; one without keys counts whole.",
			before: before, now: []workloadv1alpha1.SourceHash{src(KindConfigMap, "conf", "2"), src(KindSecret, "creds", "2")},
			why: "ConfigMap conf changed (keys a, b); Secret creds changed", changed: true,
		},
		"NoneChanged": {
			reason: "With no source changed, the workload lacks the hash.",
			before: before, now: before,
			why: "it does not carry the hash of the configuration as it is now",
		},
		"NothingBefore": {
			reason: "Without an earlier observation nothing can be said to have changed.",
			now:    before,
			why:    "it does not carry the hash of the configuration as it is now",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			why, changed := RollReason(p, tc.before, tc.now)
			if diff := cmp.Diff([]any{tc.why, tc.changed}, []any{why, changed}); diff != "" {
				t.Errorf("%s\nRollReason(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	// A workload still pending keeps the reason its last plan gave while no
	// source changes.
	prev := planned(p, "apps", nil, before, []workloadv1alpha1.SourceHash{src(KindConfigMap, "conf", "2"), src(KindSecret, "creds", "1")}, map[string]bool{"Deployment/web": true})
	again := planned(p, "apps", prev, before, before, map[string]bool{"Deployment/web": true})
	if diff := cmp.Diff(prev.Actions, again.Actions); diff != "" || again.Actions[0].Reason != "rolls its pods: ConfigMap conf changed (keys a, b)" {
		t.Errorf("the next plan of a pending workload: -first, +next:\n%s", diff)
	}
}
