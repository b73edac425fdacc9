package explore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// Timeouts of a sequence's phases.
const (
	// setupTimeout bounds the setup: replicas taking their shards, every
	// rollout's baseline and every copy.
	setupTimeout = 90 * time.Second
	// settleTimeout bounds how long the liveness oracles may take to hold
	// at a checkpoint.
	settleTimeout = 60 * time.Second
	// opTimeout bounds one operation.
	opTimeout = 90 * time.Second
	// checkpointEvery is how many steps lie between two checkpoints; the
	// last step is always followed by one.
	checkpointEvery = 10
)

// A Violation is an invariant a sequence broke.
type Violation struct {
	Seed   uint64 `json:"seed"`
	Step   int    `json:"step"`
	Oracle string `json:"oracle"`
	Detail string `json:"detail"`
	Replay string `json:"replay"`
	// Shrunk is how many operations the minimal replay keeps, of Ops.
	Shrunk int `json:"shrunk,omitempty"`
	Ops    int `json:"ops,omitempty"`
	// report is what the world looked like when the oracle failed.
	report string
}

// A Summary is what a run did, written as JSON to EXPLORE_RESULTS.
type Summary struct {
	mu          sync.Mutex
	Sequences   int            `json:"sequences"`
	Steps       int            `json:"steps"`
	Ops         map[string]int `json:"ops"`
	Violations  []Violation    `json:"violations"`
	Seeds       []uint64       `json:"seeds"`
	WallSeconds float64        `json:"wallSeconds"`
	// Commit is the tree the run measured (EXPLORE_COMMIT, which make
	// explore sets; "-dirty" when it had changes).
	Commit string `json:"commit,omitempty"`
	// ShrinkRuns counts the runs shrinking took, not in Sequences.
	ShrinkRuns int `json:"shrinkRuns,omitempty"`
	// Known are the known provider gaps sequences met, which are no
	// violations (see knownUncountedStart).
	Known []KnownGap `json:"known,omitempty"`
}

// A KnownGap is a known provider gap a sequence met.
type KnownGap struct {
	Seed uint64 `json:"seed"`
	Gap  string `json:"gap"`
	What string `json:"what"`
}

func (s *Summary) knownGap(seed uint64, gap, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Known = append(s.Known, KnownGap{Seed: seed, Gap: gap, What: what})
}

// NewSummary is an empty summary.
func NewSummary() *Summary { return &Summary{Ops: map[string]int{}, Violations: []Violation{}} }

func (s *Summary) started(seed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Sequences++
	s.Seeds = append(s.Seeds, seed)
}

func (s *Summary) stepped(op Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Steps++
	s.Ops[op.Type]++
}

func (s *Summary) shrank() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ShrinkRuns++
}

func (s *Summary) violated(v Violation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Violations = append(s.Violations, v)
}

// Write writes the summary, with the wall time since start, to path.
func (s *Summary) Write(path string, start time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.WallSeconds = time.Since(start).Seconds()
	s.Commit = os.Getenv("EXPLORE_COMMIT")
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return errors.Wrap(err, "cannot encode the summary")
	}
	return errors.Wrap(os.WriteFile(path, b, 0o600), "cannot write the summary")
}

// A run is one sequence under way.
type run struct {
	t   *testing.T
	env *testenv.Env
	seq Sequence
	st  *State
}

// Run runs seq on env from a fresh world and fleet: setup, each operation
// followed by the safety oracles, the liveness oracles at every checkpoint,
// and the world's deletion. A broken invariant is shrunk to a minimal
// sequence that still breaks it, within shrinkBudget, and fails t with the
// seed, the oracle, the world as it was, and the minimal sequence as JSON
// to replay (also written to a file for EXPLORE_REPLAY).
func Run(t *testing.T, env *testenv.Env, seq Sequence, sum *Summary, shrinkBudget time.Duration) {
	t.Helper()
	sum.started(seq.Seed)
	v := execute(t, env, seq, sum, "")
	if v == nil {
		return
	}
	full := seq
	full.Ops = seq.Ops[:min(max(v.Step+1, 0), len(seq.Ops))]
	if v.Step >= len(seq.Ops) {
		full.Ops = seq.Ops
	}
	fullPath := replayPath(seq.Seed, "-full")
	writeReplay(t, fullPath, full)
	minimal, how := full, "not shrunk"
	if shrinkBudget > 0 && v.Step >= 0 {
		var reproduced bool
		minimal, reproduced = Shrink(t, env, full, v.Oracle, shrinkBudget, sum)
		how = fmt.Sprintf("shrunk to %d ops that break the same invariant", len(minimal.Ops))
		if !reproduced {
			how = fmt.Sprintf("not shrunk: %d runs of it again broke no %q, so it takes a race", reproduceRuns, v.Oracle)
		}
	}
	v.Replay, v.Ops, v.Shrunk = replayPath(seq.Seed, ""), len(full.Ops), len(minimal.Ops)
	writeReplay(t, v.Replay, minimal)
	sum.violated(*v)
	t.Fatalf("seed %d, step %d: invariant %q violated: %v\n%s\nthe sequence up to the violation (%d ops), %s, to replay with EXPLORE_REPLAY=%s (all of it: %s):\n%s",
		seq.Seed, v.Step, v.Oracle, v.Detail, v.report, len(full.Ops), how, v.Replay, fullPath, minimal.JSON())
}

func replayPath(seed uint64, suffix string) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("explore-replay-%d%s.json", seed, suffix))
}

func writeReplay(t *testing.T, path string, s Sequence) {
	if err := os.WriteFile(path, []byte(s.JSON()), 0o600); err != nil {
		t.Logf("cannot write the replay: %v", err)
	}
}

// execute runs seq once in a world tagged tag (the seed's own world when
// empty) and returns the first violation, or nil. A violated world is
// abandoned: its managed resources are deleted with their finalizers
// removed, so that nothing of it acts on while later runs go on.
func execute(t *testing.T, env *testenv.Env, seq Sequence, sum *Summary, tag string) *Violation {
	t.Helper()
	r := newRun(t, env, seq, sum, tag)
	defer r.close()
	v := r.setup()
	for i := 0; v == nil && i < len(seq.Ops); i++ {
		v = r.step(i, seq.Ops[i], sum)
	}
	if v == nil {
		v = r.teardown()
	}
	if v != nil {
		if err := r.st.endFaults(); err != nil {
			t.Errorf("ending the faults on: %v", err)
		}
		r.abandon()
	}
	return v
}

// newRun is a run of seq in a world tagged tag, watching its pod; close
// ends it.
func newRun(t *testing.T, env *testenv.Env, seq Sequence, sum *Summary, tag string) *run {
	t.Helper()
	w := World{Seed: seq.Seed, Tag: tag, c: env.Client}
	prefix := ""
	if tag != "" {
		prefix = tag + "-"
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fleet{cfg: testenv.AsProvider(env.Config), prefix: prefix, requests: &requestLog{prefix: "team-" + w.id() + "-"}, cut: newCut()}
	st := &State{World: w, Fleet: f, m: newModel(seq.Seed), cs: cs, api: env, lasting: map[string]chan error{}, logf: t.Logf, sum: sum}
	st.pods = watchPods(cs, w.App(), podName())
	return &run{t: t, env: env, seq: seq, st: st}
}

// close ends every fault on, restores what faults take away, stops the
// fleet and the watch of the pod.
func (r *run) close() {
	if err := r.st.endFaults(); err != nil {
		r.t.Errorf("ending the faults on: %v", err)
	}
	if err := r.st.restoreInfrastructure(); err != nil {
		r.t.Fatalf("cannot restore what faults took away, for the sequences after this one: %v", err)
	}
	if err := r.st.Fleet.StopAll(); err != nil {
		r.t.Logf("stopping the fleet: %v", err)
	}
	r.st.pods.stop()
}

// setup starts the fleet, creates the world and waits until every rollout
// follows its Deployment from a baseline and the liveness oracles hold.
func (r *run) setup() *Violation {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := r.st.takeBaseline(ctx); err != nil {
		r.t.Fatal(err)
	}
	for i := range InitialReplicas {
		if err := r.st.Fleet.Start(Identity(r.seq.Seed, i)); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.st.World.Create(ctx); err != nil {
		r.t.Fatal(err)
	}
	setup := append([]oracle{{"every rollout follows from a baseline", baselined}}, liveness()...)
	t0 := time.Now()
	if name, err := settle(setup, r.st, setupTimeout); err != nil {
		return r.violation(-1, name, err)
	}
	r.t.Logf("setup: settled in %s", time.Since(t0).Round(time.Millisecond))
	for j := range targets {
		d := r.st.World.deployment(j)
		if err := r.env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			r.t.Fatal(err)
		}
		r.st.SetupGen[j] = d.Generation
	}
	return nil
}

// step applies op i, checks the safety oracles, and the liveness oracles
// at a checkpoint.
func (r *run) step(i int, op Op, sum *Summary) *Violation {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	sum.stepped(op)
	t0 := time.Now()
	if err := r.st.Apply(ctx, op); err != nil {
		return r.violation(i, "operation "+op.Type+" succeeds", err)
	}
	r.st.m.apply(op)
	r.t.Logf("%s step %d: %s (%s)", t0.Format("15:04:05.000"), i, op, time.Since(t0).Round(time.Millisecond))
	if name, err := check(ctx, r.st, safety()); err != nil {
		return r.violation(i, name, err)
	}
	if op.Type != OpCheckpoint && (i+1)%checkpointEvery != 0 && i != len(r.seq.Ops)-1 {
		return nil
	}
	if err := r.st.endFaults(); err != nil {
		return r.violation(i, "every fault ends", err)
	}
	t0 = time.Now()
	if name, err := settle(liveness(), r.st, settleTimeout); err != nil {
		return r.violation(i, name, err)
	}
	r.t.Logf("checkpoint after step %d: settled in %s", i, time.Since(t0).Round(time.Millisecond))
	if os.Getenv("EXPLORE_DESCRIBE") != "" {
		r.t.Logf("%s", r.st.Describe(ctx))
	}
	if name, err := check(ctx, r.st, safety()); err != nil {
		return r.violation(i, name, err)
	}
	return nil
}

// lifting are the operations that undo what the model holds switched,
// denied or observed, and bring the flux namespace back.
func (m *model) lifting() []Op {
	var out []Op
	for _, t := range m.deniedList() {
		out = append(out, Op{Type: OpAllow, T: t})
	}
	if m.switchOn {
		out = append(out, Op{Type: OpKillSwitch, T: 0})
	}
	if m.excluded {
		out = append(out, Op{Type: OpExclude, T: 0})
	}
	for _, k := range m.observable() {
		if m.observes(k.kind, k.j) {
			out = append(out, Op{Type: OpObserve, Kind: k.kind, J: k.j, T: 0})
		}
	}
	return out
}

// teardown lifts every switch, denial and Observe, then deletes every
// managed resource: what they made goes with them (their finalizers)
// before the fleet stops.
func (r *run) teardown() *Violation {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := r.st.endFaults(); err != nil {
		return r.violation(len(r.seq.Ops), "every fault ends", err)
	}
	lifting := r.st.m.lifting()
	for _, op := range lifting {
		if err := r.st.Apply(ctx, op); err != nil {
			return r.violation(len(r.seq.Ops), "operation "+op.Type+" succeeds", err)
		}
		r.st.m.apply(op)
		r.t.Logf("teardown: %s", op)
	}
	if len(lifting) > 0 {
		// What was denied, switched or observed catches up once lifted.
		if name, err := settle(liveness(), r.st, settleTimeout); err != nil {
			return r.violation(len(r.seq.Ops), name, err)
		}
	}
	w := r.st.World
	if err := w.Delete(ctx); err != nil {
		r.t.Fatal(err)
	}
	for j := range targets {
		r.st.m.deleted[j] = true
	}
	r.st.m.bundleGone, r.st.m.immortalGone, r.st.m.agentGone = true, true, true
	gone := []oracle{
		{"a deleted rule's copies are gone", deletedGone},
		{"a deleted workload resource is gone, and what it made", workloadGone},
		{"every managed resource is gone", noneLeft},
		{"no copy of a deleted rule is left", noCopyLeft},
	}
	if name, err := settle(gone, r.st, settleTimeout); err != nil {
		return r.violation(len(r.seq.Ops), name, err)
	}
	if err := r.st.Fleet.StopAll(); err != nil {
		r.t.Fatal(err)
	}
	if name, err := settle(baselines(), r.st, settleTimeout); err != nil {
		return r.violation(len(r.seq.Ops), name, err)
	}
	if err := w.DeleteNamespaces(ctx); err != nil {
		r.t.Fatal(err)
	}
	return nil
}

// abandon deletes a violated world's managed resources with their
// finalizers removed, its namespaces and its config, best effort.
func (r *run) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := r.st.World
	mgs, err := w.managed(ctx)
	if err != nil {
		r.t.Logf("abandoning the world: %v", err)
	}
	for _, mg := range mgs {
		_ = w.c.Delete(ctx, mg)
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(mg), mg); err != nil {
				return client.IgnoreNotFound(err)
			}
			mg.SetFinalizers(nil)
			return client.IgnoreNotFound(w.c.Update(ctx, mg))
		})
	}
	if err := w.DeleteNamespaces(ctx); err != nil {
		r.t.Logf("abandoning the world: %v", err)
	}
}

// settle polls until every oracle holds, and returns the first that did
// not when timeout passed.
func settle(oracles []oracle, s *State, timeout time.Duration) (string, error) {
	var name string
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		name, last = check(ctx, s, oracles)
		return last == nil, nil
	})
	if err != nil {
		return name, errors.Wrapf(last, "not within %s", timeout)
	}
	return "", nil
}

// violation is the violation of oracle at step (-1: setup; the number of
// ops: teardown), with what the world looks like now.
func (r *run) violation(step int, name string, err error) *Violation {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.t.Logf("seed %d (world %s), step %d: invariant %q violated: %v", r.seq.Seed, r.st.World.id(), step, name, err)
	return &Violation{Seed: r.seq.Seed, Step: step, Oracle: name, Detail: err.Error(),
		report: fmt.Sprintf("fleet: %v\n%s", r.st.Fleet.IDs(), r.st.Describe(ctx))}
}
