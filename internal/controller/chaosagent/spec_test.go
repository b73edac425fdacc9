package chaosagent

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

func TestCompileDefaultsAndRefusesBadParameters(t *testing.T) {
	type want struct {
		tolerance, eagerness, maxActions int
		maxReplicas                      int32
		interval                         time.Duration
		evict, revert                    bool
		err                              string
	}
	cases := map[string]struct {
		reason string
		params v1alpha1.ChaosAgentParameters
		want   want
	}{
		"Defaults": {
			reason: "Unset parameters get the CRD's defaults.",
			params: v1alpha1.ChaosAgentParameters{TantrumMode: true},
			want:   want{eagerness: 50, maxActions: 1, maxReplicas: 128, interval: time.Minute, evict: true, revert: true},
		},
		"Explicit": {
			reason: "Set parameters are kept.",
			params: v1alpha1.ChaosAgentParameters{
				CancerMode: true, PodTolerance: 3, Eagerness: 100, MaxActionsPerRound: 4, MaxReplicas: 8,
				Interval: metav1.Duration{Duration: time.Second}, RespectDisruptionBudgets: ptr.To(false), RevertOnDelete: ptr.To(false),
			},
			want: want{tolerance: 3, eagerness: 100, maxActions: 4, maxReplicas: 8, interval: time.Second},
		},
		"NoMode":          {reason: "An agent without a mode is refused.", params: v1alpha1.ChaosAgentParameters{}, want: want{err: "enable at least one of tantrumMode, cancerMode or ipsumMode"}},
		"EagerTooMuch":    {reason: "Eagerness is a percentage.", params: v1alpha1.ChaosAgentParameters{IpsumMode: true, Eagerness: 101}, want: want{err: "eagerness 101 is outside 1–100"}},
		"NegativeTolerat": {reason: "Tolerances are not negative.", params: v1alpha1.ChaosAgentParameters{TantrumMode: true, PodTolerance: -1}, want: want{err: "podTolerance -1 is negative"}},
		"ShortInterval": {
			reason: "Rounds are at least a second apart.",
			params: v1alpha1.ChaosAgentParameters{TantrumMode: true, Interval: metav1.Duration{Duration: time.Millisecond}},
			want:   want{err: "interval 1ms is shorter than 1s"},
		},
		"BadSelector": {
			reason: "A selector with an unknown operator is refused, naming the field.",
			params: v1alpha1.ChaosAgentParameters{TantrumMode: true, PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Equals"}}}},
			want:   want{err: "podSelector is invalid"},
		},
		"EmptySteadyState": {
			reason: "A steady state that checks nothing is refused.",
			params: v1alpha1.ChaosAgentParameters{TantrumMode: true, SteadyState: &v1alpha1.SteadyState{}},
			want:   want{err: "steadyState: set minAvailablePercent, noCrashLoops: true, or both"},
		},
		"SteadyStatePercent": {
			reason: "minAvailablePercent is a percentage.",
			params: v1alpha1.ChaosAgentParameters{TantrumMode: true, SteadyState: &v1alpha1.SteadyState{MinAvailablePercent: ptr.To[int32](0)}},
			want:   want{err: "steadyState.minAvailablePercent 0 is outside 1–100"},
		},
		"SteadyStateSelector": {
			reason: "A steady state's bad selector is refused, naming the field.",
			params: v1alpha1.ChaosAgentParameters{TantrumMode: true, SteadyState: &v1alpha1.SteadyState{NoCrashLoops: true, Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Equals"}}}}},
			want:   want{err: "steadyState.selector is invalid"},
		},
		"RecoveryTimeout": {
			reason: "recoveryTimeout is between 1s and 24h.",
			params: v1alpha1.ChaosAgentParameters{TantrumMode: true, RecoveryTimeout: &metav1.Duration{Duration: 25 * time.Hour}},
			want:   want{err: "recoveryTimeout 25h0m0s is outside 1s to 24h0m0s"},
		},
		"BadWindow": {
			reason: "A malformed quiet window is refused, naming its index.",
			params: v1alpha1.ChaosAgentParameters{TantrumMode: true, QuietWindows: []v1alpha1.QuietWindow{{Start: "09:00", End: "17:00"}, {Start: "nine", End: "17:00"}}},
			want:   want{err: "quietWindows[1] is invalid"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Compile(tc.params)
			got := want{tolerance: s.PodTolerance, eagerness: s.Eagerness, maxActions: s.MaxActions, maxReplicas: s.MaxReplicas, interval: s.Interval, evict: s.Evict, revert: s.Revert}
			if err != nil {
				if !strings.Contains(err.Error(), tc.want.err) || tc.want.err == "" {
					t.Errorf("\n%s\nCompile(...): want error containing %q, got %v", tc.reason, tc.want.err, err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nCompile(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzSelector compiles arbitrary pod selectors: compiling never panics, a
// selector that compiles never panics on matching, and a selector of plain
// matchLabels matches exactly the objects that carry those labels.
func FuzzSelector(f *testing.F) {
	f.Add("app", "In", "web", "app", "web")
	f.Add("tier", "NotIn", "db", "tier", "web")
	f.Add("chaos.clusterops.io/victim", "Exists", "", "x", "y")
	f.Add("bad key!", "Equals", "v", "", "")
	f.Fuzz(func(t *testing.T, key, op, value, objKey, objValue string) {
		req := metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOperator(op)}
		if value != "" {
			req.Values = []string{value}
		}
		objLabels := labels.Set{objKey: objValue}
		s, err := Compile(v1alpha1.ChaosAgentParameters{TantrumMode: true, PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req}}})
		if err == nil {
			_ = s.PodSelector.Matches(objLabels)
		}
		s, err = Compile(v1alpha1.ChaosAgentParameters{TantrumMode: true, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}})
		if err != nil {
			return
		}
		want := objKey == key && objValue == value
		if got := s.PodSelector.Matches(objLabels); got != want {
			t.Fatalf("selector {%q: %q} matches %v: %t, want %t", key, value, objLabels, got, want)
		}
	})
}
