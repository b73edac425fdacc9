package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestExploreReportJudgesTheFinalCodeAndRefusesDirtyTrees(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	current := func(commit string) (bool, error) { return commit != "old0000", nil }
	write("a.json", `{"sequences": 200, "steps": 8000, "ops": {"deny": 3}, "seeds": [10, 209], "wallSeconds": 1200, "commit": "abc1234", "violations": []}`)
	write("b.json", `{"sequences": 100, "steps": 2000, "ops": {"deny": 2, "join": 1}, "seeds": [300, 399], "wallSeconds": 600, "commit": "def5678", "violations": []}`)
	got, err := exploreReport(dir, current)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| all | | | | 300 | 10000 | 0 |", "| final code | | | | 300 | 10000 | 0 |", "final code: met.", "| `deny` | 5 |", "| a.json | abc1234 | yes | 10–209 | 200 | 8000 | 0 | 0 | 20 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}

	// A violation of earlier code is listed, but neither it nor that run's
	// sequences count for the target.
	write("o.json", `{"sequences": 50, "steps": 500, "commit": "old0000", "violations": [{"seed": 7, "step": 29, "oracle": "o", "detail": "d"}]}`)
	if got, err = exploreReport(dir, current); err != nil || !strings.Contains(got, "final code: met.") || !strings.Contains(got, "o.json (earlier code), seed 7") || !strings.Contains(got, "| all | | | | 350 | 10500 | 1 |") {
		t.Errorf("a violation of earlier code counted against the final code (%v):\n%s", err, got)
	}
	write("v.json", `{"sequences": 1, "steps": 30, "commit": "abc1234", "violations": [{"seed": 7, "step": 29, "oracle": "o", "detail": "d"}]}`)
	if got, err = exploreReport(dir, current); err != nil || !strings.Contains(got, "not met: 1 violations") {
		t.Errorf("a violation left the target met (%v):\n%s", err, got)
	}
	write("c.json", `{"sequences": 1, "steps": 1, "commit": "abc1234-dirty"}`)
	if _, err := exploreReport(dir, current); err == nil {
		t.Error("a run of a dirty tree was reported")
	}
}

func TestSameExploreInputsComparesWithHead(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	if same, err := sameExploreInputs(strings.TrimSpace(string(head))); err != nil || !same {
		t.Errorf("sameExploreInputs(HEAD) = %v, %v; want true", same, err)
	}
	// The first commit had no provider at all: its inputs differ, wherever
	// the test runs (go test runs it in hack/fleetreport).
	first, err := exec.Command("git", "rev-list", "--max-parents=0", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	// A shallow clone's first commit is HEAD itself.
	if f := strings.Fields(string(first))[0]; f != strings.TrimSpace(string(head)) {
		if same, err := sameExploreInputs(f); err != nil || same {
			t.Errorf("sameExploreInputs(first commit) = %v, %v; want false", same, err)
		}
	}
	for _, bad := range []string{"0000000000000000000000000000000000000000", "--output=x", "HEAD"} {
		if _, err := sameExploreInputs(bad); err == nil {
			t.Errorf("sameExploreInputs(%q) compared without an error", bad)
		}
	}
}
