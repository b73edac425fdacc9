package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fleet-wide fault scenarios run at two sizes: the short version in make
// test, and the full one in make bench-faults, which sets
// CLUSTEROPS_FAULT_SCALE=10, CLUSTEROPS_FAULT_RESULTS to the directory of
// their committed results and BENCH_COMMIT to the commit they measure.

// FaultScale multiplies the fleets of the fault scenarios and the time they
// are given: 1 unless CLUSTEROPS_FAULT_SCALE says more.
func FaultScale() int {
	n, err := strconv.Atoi(os.Getenv("CLUSTEROPS_FAULT_SCALE"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Scaled is d at the scale the fault scenarios run at.
func Scaled(d time.Duration) time.Duration { return d * time.Duration(FaultScale()) }

// A FaultResult is what a fault scenario measured, for make bench-faults'
// report (hack/faultreport).
type FaultResult struct {
	Scenario string
	// Commit is the commit the scenario measured (BENCH_COMMIT).
	Commit string `json:",omitempty"`
	Scale  int
	// Passed is whether every assertion of the scenario held.
	Passed bool
	// Figures are the scenario's measurements by name: seconds end in _s,
	// the rest are counts.
	Figures map[string]float64
}

// RecordFault writes figures, as the test fills them in, to
// $CLUSTEROPS_FAULT_RESULTS/<test>.json when the test ends, with whether it
// passed; nothing without that variable.
func RecordFault(t *testing.T, figures map[string]float64) {
	t.Helper()
	dir := os.Getenv("CLUSTEROPS_FAULT_RESULTS")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		r := FaultResult{Scenario: t.Name(), Commit: os.Getenv("BENCH_COMMIT"), Scale: FaultScale(), Passed: !t.Failed(), Figures: figures}
		b, err := json.MarshalIndent(r, "", "  ")
		if err == nil {
			err = os.MkdirAll(dir, 0o750)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "-")+".json"), b, 0o600)
		}
		if err != nil {
			t.Errorf("cannot record the result: %v", err)
		}
	})
}
