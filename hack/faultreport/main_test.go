package main

import (
	"math"
	"strings"
	"testing"
)

func TestSlopeIsTheLeastSquaresSlope(t *testing.T) {
	cases := map[string]struct {
		reason string
		xs, ys []float64
		want   float64
	}{
		"Flat":     {reason: "A constant has no slope.", xs: []float64{0, 1, 2, 3}, ys: []float64{5, 5, 5, 5}, want: 0},
		"Line":     {reason: "A line's slope is its own.", xs: []float64{0, 1, 2, 3}, ys: []float64{1, 3, 5, 7}, want: 2},
		"Noisy":    {reason: "Noise around a line averages out.", xs: []float64{0, 1, 2, 3}, ys: []float64{1, 2, 1, 2}, want: 0.2},
		"OnePoint": {reason: "One sample has no slope.", xs: []float64{4}, ys: []float64{9}, want: 0},
		"SameX":    {reason: "Samples at one x have no slope.", xs: []float64{2, 2}, ys: []float64{1, 9}, want: 0},
		"Mismatch": {reason: "Lengths that differ have no slope.", xs: []float64{0, 1}, ys: []float64{1}, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := slope(tc.xs, tc.ys); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("\n%s\nslope(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// TestReportGivesGrowthAndCostPerChange checks the report of a run whose heap grows 1 MiB a minute in
// its second half and whose changes cost 10 requests each.
func TestReportGivesGrowthAndCostPerChange(t *testing.T) {
	r := result{N: 100, Namespaces: 1, Minutes: 4, PercentPerMinute: 1}
	for m := range 4 {
		r.Samples = append(r.Samples, sample{Minute: m, Changes: 2, Heap: float64(10+m) * (1 << 20), Goroutines: 50, Requests: 20, Writes: 4, Reconciles: 2})
	}
	got := report(r, "soak.svg")
	for _, want := range []string{
		"| heap after a GC, MiB | 10.0 | 13.0 | +60.00 MiB |",
		"| goroutines | 50.0 | 50.0 | +0.00 |",
		"| API requests | 10.0 | 10.0 | 10.0 |",
		"8 changes in all, 0 not acted on",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

func TestFaultTableShowsEachScenariosVerdict(t *testing.T) {
	got := faultTable([]fault{
		{Scenario: "TestFleetWaveSurvivesKills", Scale: 10, Passed: true, Figures: map[string]float64{"resources": 10000, "wave_s": 412.34}},
		{Scenario: "TestRemoteClusterGoesDark", Scale: 10, Figures: map[string]float64{"dark_s": 300.04}},
	})
	for _, want := range []string{
		"| `TestFleetWaveSurvivesKills` | 10× | not recorded | yes | resources 10000, wave 412.3 s |",
		"| `TestRemoteClusterGoesDark` | 10× | not recorded | **no** | dark 300.0 s |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if got := faultTable(nil); !strings.Contains(got, "make bench-faults") {
		t.Errorf("an empty table says %q, want where results come from", got)
	}
}
