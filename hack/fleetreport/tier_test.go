package main

import (
	"strings"
	"testing"
)

func TestTierTimeCountsEachRunsWallTime(t *testing.T) {
	rs := []result{
		{FloorSeconds: 600, Seconds: 900, RestartSeconds: 60, WallSeconds: 1800, Phases: map[string]float64{"floor": 600, "converge": 900, "setup": 300}},
		{FloorSeconds: 60, Seconds: 90, RestartSeconds: 30},
	}
	cases := map[string]struct {
		took string
		want []string
		met  bool
	}{
		"a whole run says its own minutes": {
			took: "every scenario 2026-11-28 at abc1234: configrollout 100 one, copyrule 100 one (44 min)",
			want: []string{"44 min for the 2 scenarios in one run", "timed phases alone, floor, converge and restart: 29 min", "raw client's phases take 11 min", "at least 28 min", "over the 1 scenarios that recorded them: converge 15.0; floor 10.0; setup 5.0"},
			met:  true,
		},
		"narrowed runs are the sum of their wall times": {
			took: "every scenario 2026-11-20 at abc1234: … (80 min); 2026-11-28 at def5678: configrollout 100 one (3 min)",
			want: []string{"33 min for the 2 scenarios, the sum of their runs", "1 of them counted by their timed phases alone"},
			met:  true,
		},
		"a whole run over its budget": {
			took: "every scenario 2026-11-28 at abc1234: … (91 min)",
			want: []string{"91 min for the 2 scenarios in one run"},
			met:  false,
		},
		"no took": {
			want: []string{"33 min for the 2 scenarios, the sum of their runs"},
			met:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, met := tierResult(rs, tc.took, nil)
			if met != tc.met {
				t.Errorf("met = %v, want %v: %s", met, tc.met, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
		})
	}
}

// TestReportTierOfWholeRun: the report hands the tier row took as written,
// so a whole run gives its own minutes rather than being summed as if it
// were narrowed runs.
func TestReportTierOfWholeRun(t *testing.T) {
	rs := []result{{Kind: "copyrule", Layout: "one", N: 100, FloorSeconds: 60, Seconds: 90, RestartSeconds: 30, WallSeconds: 300}}
	got := report(rs, "every scenario 2026-11-28 at abc1234: copyrule 100 one (7 min)", nil, "fleet.svg", nil)
	if !strings.Contains(got, "7 min for the 1 scenarios in one run") {
		t.Errorf("the report's tier row does not give the whole run's minutes:\n%s", got)
	}
}
