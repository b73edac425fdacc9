package main

import (
	"strings"
	"testing"
)

func TestShardedReportShowsEachReplicasCost(t *testing.T) {
	const mib = 1 << 20
	rs := []shardedResult{
		{Kind: "copyrule", N: 10000, Replicas: 1, Seconds: 100, Replica: []replicaResult{{BaseHeap: 10 * mib, Heap: 110 * mib, Watches: 12, Requests: 30000, LeaseRequests: 1000, CPU: 60}}},
		{Kind: "copyrule", N: 10000, Replicas: 2, Seconds: 98, Replica: []replicaResult{
			{BaseHeap: 10 * mib, Heap: 65 * mib, Watches: 6, Requests: 15500, LeaseRequests: 600, CPU: 31},
			{BaseHeap: 10 * mib, Heap: 75 * mib, Watches: 8, Requests: 15500, LeaseRequests: 600, CPU: 33},
		}},
		{Kind: "copyrule", N: 10000, Replicas: 4, Seconds: 120, LeaseSeconds: 8, KillSeconds: 25, TakeoverSeconds: 19, Replica: []replicaResult{
			{Killed: true},
			{BaseHeap: 10 * mib, Heap: 40 * mib, Requests: 9000},
			{BaseHeap: 10 * mib, Heap: 40 * mib, Requests: 9000},
			{BaseHeap: 10 * mib, Heap: 40 * mib, Requests: 9000},
		}},
		{Kind: "copyrule", N: 100000, Replicas: 2, Seconds: 1800, StoppedReady: 41000, Replica: []replicaResult{
			{BaseHeap: 10 * mib, Heap: 500 * mib, Requests: 300000},
			{BaseHeap: 10 * mib, Heap: 480 * mib, Requests: 290000},
		}},
	}
	got := shardedReport(rs, map[string]string{"sharded-heap": "the leader's singletons", "sharded-requests": "never shown: met"})
	for _, want := range []string{
		"| copyrule | 10000 | 1 | 100.0 | 100.0 (≤ 110.0) | 12 (≤ 13) | 30000 (1.00×) | 1000 | 60 | – |",
		// 65 MiB is above 100 × (1/2 + 10%) = 60 MiB: missed; 8 watches
		// above 12 × 0.6 = 7.2: missed; requests 1.03×: met.
		"| copyrule | 10000 | 2 | 98.0 | 55.0 / 65.0 (≤ 60.0, **missed**) | 6 / 8 (≤ 7, **missed**) | 31000 (1.03×) | 1200 | 31 / 33 | – |",
		// 19 s is beyond the 8 s lease + 10 s: missed.
		// A kill's survivors are not judged on their shares.
		"| killed / 30.0 / 30.0 / 30.0 | – / 0 / 0 / 0 |",
		"shares taken over in 19.0 s (≤ 18 s, **missed**); all Ready after 25.0 s",
		// A run stopped at its deadline is not judged against 10,000's.
		"| copyrule | 100000 | 2 | stopped at 1800 with 41000 Ready | 490.0 / 470.0 | 0 / 0 | 590000 | 0 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	svg := shardedChart(rs)
	if !strings.HasPrefix(svg, "<svg") || strings.Count(svg, `fill="#1f77b4"/>`) != 3 {
		t.Errorf("the chart lacks a heap bar for each run without a kill:\n%s", svg)
	}
	if !strings.Contains(got, "- **heap**: the leader's singletons") || strings.Contains(got, "never shown") {
		t.Errorf("the report does not give the reason of exactly the targets missed:\n%s", got)
	}
	if shardedReport(nil, nil) != "" {
		t.Error("a report without sharded results has a section")
	}
}

// TestChangeReportJudgesReconcilesPerMoved: a change of the replicas is
// kept apart from the shares' table and judged by its reconciles per
// resource moved.
func TestChangeReportJudgesReconcilesPerMoved(t *testing.T) {
	rs := []shardedResult{
		{Kind: "copyrule", N: 10000, Replicas: 4},
		{Kind: "copyrule", N: 10000, Replicas: 3, Change: &changeResult{Change: "join", MovedShards: 3, MovedResources: 2500, Reconciles: 2600, ReconcilesPerMoved: 1.04}},
		{Kind: "copyrule", N: 10000, Replicas: 4, Change: &changeResult{Change: "leave", MovedShards: 3, MovedResources: 2500, Reconciles: 5000, ReconcilesPerMoved: 2}},
	}
	shared, changes := apart(rs)
	if len(shared) != 1 || len(changes) != 2 {
		t.Fatalf("apart: %d shared, %d changes; want 1 and 2", len(shared), len(changes))
	}
	got := changeReport(changes, map[string]string{"sharded-change": "because"})
	for _, want := range []string{"| copyrule | 10000 | join | 3 | 2500 | 2600 (1.04, ≤ 1.1) |", "| copyrule | 10000 | leave | 3 | 2500 | 5000 (2.00, ≤ 1.1, **missed**) |", "because"} {
		if !strings.Contains(got, want) {
			t.Errorf("changeReport lacks %q:\n%s", want, got)
		}
	}
}
