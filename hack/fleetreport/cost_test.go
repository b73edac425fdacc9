package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCostReportComparesRunsOfOneScenario(t *testing.T) {
	dir := t.TempDir()
	runs := map[string]result{
		"base-1": {Kind: "copyrule", N: 10000, Layout: "one", Seconds: 150, FloorSeconds: 100, RequestsPerMR: 5, CPU: map[string]float64{"provider": 40, "apiserver": 200}, FloorCPU: map[string]float64{"apiserver": 100}, Heap: 100 << 20, Commit: "aaa"},
		"head-1": {Kind: "copyrule", N: 10000, Layout: "one", Seconds: 165, FloorSeconds: 100, RequestsPerMR: 5, CPU: map[string]float64{"provider": 44, "apiserver": 200}, FloorCPU: map[string]float64{"apiserver": 100}, Heap: 105 << 20, Commit: "bbb"},
	}
	for run, r := range runs {
		if err := os.MkdirAll(filepath.Join(dir, run), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, run, "copyrule-one-10000.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := costReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| base-1 | aaa | 100.00 | 150.00 | 1.50 | 5.00 |",
		"| head-1 | bbb | 100.00 | 165.00 | 1.65 | 5.00 |",
		// Converge 165 s against 150 (÷ floor 1.65 against 1.50); provider CPU 44 against 40;
		// heap 105 against 100.
		"| **head vs base** (1 and 1 runs) | | +0.0% (100.00–100.00 vs 100.00–100.00) | +10.0% (165.00–165.00 vs 150.00–150.00) | +10.0% (1.65–1.65 vs 1.50–1.50) | +0.0%",
		"+10.0% (44.00–44.00 vs 40.00–40.00)",
		"+5.0% (105.00–105.00 vs 100.00–100.00) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}
