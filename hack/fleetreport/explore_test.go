package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExploreReportTotalsRunsAndRefusesDirtyTrees(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.json", `{"sequences": 200, "steps": 8000, "ops": {"deny": 3}, "seeds": [10, 209], "wallSeconds": 1200, "commit": "abc1234", "violations": []}`)
	write("b.json", `{"sequences": 100, "steps": 2000, "ops": {"deny": 2, "join": 1}, "seeds": [300, 399], "wallSeconds": 600, "commit": "def5678", "violations": []}`)
	got, err := exploreReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| all | | | 300 | 10000 | 0 |", "met.", "| `deny` | 5 |", "| a.json | abc1234 | 10–209 | 200 | 8000 | 0 | 0 | 20 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	write("v.json", `{"sequences": 1, "steps": 30, "commit": "abc1234", "violations": [{"seed": 7, "step": 29, "oracle": "o", "detail": "d"}]}`)
	if got, err = exploreReport(dir); err != nil || !strings.Contains(got, "not met: 1 violations") {
		t.Errorf("a violation left the target met (%v):\n%s", err, got)
	}
	write("c.json", `{"sequences": 1, "steps": 1, "commit": "abc1234-dirty"}`)
	if _, err := exploreReport(dir); err == nil {
		t.Error("a run of a dirty tree was reported")
	}
}
