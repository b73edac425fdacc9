package explore

import (
	"fmt"
	"testing"
	"time"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// Shrink reduces seq, which broke oracle, to a shorter sequence that still
// breaks it, by delta debugging: it drops chunks of operations, halving
// them down to single operations, and keeps a candidate when a run of it
// breaks the same oracle. A candidate keeps only the operations the model
// allows after the ones before (normalize), so that an op never names a
// rule, pod or replica that the dropped ops would have made. Each run
// builds a world of its own; no run starts once budget has passed, and
// what is smallest then is the answer. A violation that takes a race to
// show may not show again: seq itself is run again first, up to
// reproduceRuns times, and when it never breaks the oracle again it is
// returned as it is, with reproduced false.
func Shrink(t *testing.T, env *testenv.Env, seq Sequence, oracle string, budget time.Duration, sum *Summary) (shrunk Sequence, reproduced bool) {
	t.Helper()
	deadline := time.Now().Add(budget)
	attempt := 0
	fails := func(ops []Op) bool {
		attempt++
		cand := Sequence{Seed: seq.Seed, Note: seq.Note, Ops: ops}
		tag := fmt.Sprintf("%dx%d", seq.Seed, attempt)
		sum.shrank()
		v := execute(t, env, cand, NewSummary(), tag)
		t.Logf("shrink run %d: %d ops: %s", attempt, len(ops), verdict(v, oracle))
		return v != nil && v.Oracle == oracle
	}
	ops := normalize(seq.Seed, seq.Ops)
	for i := range reproduceRuns {
		if reproduced = fails(ops); reproduced || time.Now().After(deadline) {
			break
		}
		t.Logf("shrink: the sequence did not break %q again (%d of %d)", oracle, i+1, reproduceRuns)
	}
	if !reproduced {
		return seq, false
	}
	n := 2
	for len(ops) >= 2 && time.Now().Before(deadline) {
		chunk := (len(ops) + n - 1) / n
		reduced := false
		for start := 0; start < len(ops) && time.Now().Before(deadline); start += chunk {
			cand := normalize(seq.Seed, append(append([]Op{}, ops[:start]...), ops[min(start+chunk, len(ops)):]...))
			if len(cand) < len(ops) && fails(cand) {
				ops, n, reduced = cand, max(n-1, 2), true
				break
			}
		}
		if reduced {
			continue
		}
		if n >= len(ops) {
			break
		}
		n = min(2*n, len(ops))
	}
	out := seq
	out.Ops = ops
	return out, true
}

// reproduceRuns is how many times Shrink runs a failing sequence again to
// see it fail before it shrinks it.
const reproduceRuns = 2

func verdict(v *Violation, oracle string) string {
	switch {
	case v == nil:
		return "passes"
	case v.Oracle == oracle:
		return "fails the same way"
	}
	return "fails otherwise: " + v.Oracle
}

// normalize keeps the operations of ops that the model allows after those
// kept before them.
func normalize(seed uint64, ops []Op) []Op {
	m := newModel(seed)
	out := make([]Op, 0, len(ops))
	for _, op := range ops {
		if !m.allows(op) {
			continue
		}
		m.apply(op)
		out = append(out, op)
	}
	return out
}
