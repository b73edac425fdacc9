package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLeaderAndOthers(t *testing.T) {
	w := func(ws ...float64) []replicaResult {
		var out []replicaResult
		for _, v := range ws {
			out = append(out, replicaResult{Watches: v})
		}
		return out
	}
	of := func(x replicaResult) float64 { return x.Watches }
	cases := map[string]struct {
		in   []replicaResult
		want string
	}{
		"One":          {w(1027), "1,027"},
		"OthersAlike":  {w(526, 519), "526 / 519"},
		"OthersRange":  {w(275, 270, 266, 268), "275 / 266–270"},
		"AllTheSame":   {w(54, 54.2, 53.9), "54"},
		"LeaderHigher": {w(10256, 5375), "10,256 / 5,375"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := leaderAndOthers(tc.in, of); got != tc.want {
				t.Errorf("leaderAndOthers = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSizingTableIsCurrent: docs/operations.md's sizing table is what the
// committed sharded results give.
func TestSizingTableIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	rs, err := readSharded(filepath.Join(root, "bench", "results", "fleet", "sharded"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), sizingBegin+"\n")
	got, _, ok2 := strings.Cut(rest, sizingEnd)
	if !ok || !ok2 {
		t.Fatal("docs/operations.md has no sizing table markers")
	}
	if want := sizingTable(rs); got != want {
		t.Errorf("docs/operations.md's sizing table is not what the results give: run make bench-fleet's report step (go run ./hack/fleetreport -sizing docs/operations.md ...)\ngot:\n%s\nwant:\n%s", got, want)
	}
}
