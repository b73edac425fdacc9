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
	sum *Summary
	st  *State
}

// Run runs seq on env from a fresh world and fleet: setup, each operation
// followed by the safety oracles, the liveness oracles at every checkpoint,
// and the world's deletion. A broken invariant fails t with the seed and
// the sequence up to the step that broke it, as JSON to replay.
func Run(t *testing.T, env *testenv.Env, seq Sequence, sum *Summary) {
	t.Helper()
	sum.started(seq.Seed)
	r := &run{t: t, env: env, seq: seq, sum: sum}
	r.st = &State{World: World{Seed: seq.Seed, c: env.Client}, Fleet: &Fleet{cfg: env.Config}}
	t.Cleanup(func() {
		if err := r.st.Fleet.StopAll(); err != nil {
			t.Logf("stopping the fleet: %v", err)
		}
	})
	r.setup()
	for i, op := range seq.Ops {
		r.step(i, op)
	}
	r.teardown()
}

// setup starts the fleet, creates the world and waits until every rollout
// follows its Deployment from a baseline and the liveness oracles hold.
func (r *run) setup() {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
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
		r.fail(-1, name, err)
	}
	r.t.Logf("setup: settled in %s", time.Since(t0).Round(time.Millisecond))
	for j := range targets {
		d := r.st.World.deployment(j)
		if err := r.env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			r.t.Fatal(err)
		}
		r.st.SetupGen[j] = d.Generation
	}
}

// step applies op i, checks the safety oracles, and the liveness oracles
// at a checkpoint.
func (r *run) step(i int, op Op) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r.sum.stepped(op)
	t0 := time.Now()
	if err := r.st.Apply(ctx, op); err != nil {
		r.fail(i, "operation "+op.Type+" succeeds", err)
	}
	r.t.Logf("%s step %d: %s (%s)", t0.Format("15:04:05.000"), i, op, time.Since(t0).Round(time.Millisecond))
	if name, err := check(ctx, r.st, safety()); err != nil {
		r.fail(i, name, err)
	}
	if op.Type != OpCheckpoint && (i+1)%checkpointEvery != 0 && i != len(r.seq.Ops)-1 {
		return
	}
	t0 = time.Now()
	if name, err := settle(liveness(), r.st, settleTimeout); err != nil {
		r.fail(i, name, err)
	}
	r.t.Logf("checkpoint after step %d: settled in %s", i, time.Since(t0).Round(time.Millisecond))
	if name, err := check(ctx, r.st, safety()); err != nil {
		r.fail(i, name, err)
	}
}

// teardown deletes every rule and rollout: their copies go with them (the
// rules' finalizers) before the fleet stops.
func (r *run) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	w := r.st.World
	if err := w.Delete(ctx); err != nil {
		r.t.Fatal(err)
	}
	for j := range targets {
		r.st.Deleted[j] = true
	}
	gone := []oracle{
		{"a deleted rule's copies are gone", deletedGone},
		{"every managed resource is gone", noneLeft},
		{"no copy of a deleted rule is left", noCopyLeft},
	}
	if name, err := settle(gone, r.st, settleTimeout); err != nil {
		r.fail(len(r.seq.Ops), name, err)
	}
	if err := r.st.Fleet.StopAll(); err != nil {
		r.t.Fatal(err)
	}
	if err := w.DeleteNamespaces(ctx); err != nil {
		r.t.Fatal(err)
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

// fail records the violation of oracle at step (-1: setup) and fails the
// test with the seed and the sequence up to that step as JSON, which it
// also writes to a file for EXPLORE_REPLAY.
func (r *run) fail(step int, name string, err error) {
	r.t.Helper()
	replay := r.seq
	replay.Ops = r.seq.Ops[:min(step+1, len(r.seq.Ops))]
	path := filepath.Join(os.TempDir(), fmt.Sprintf("explore-replay-%d.json", r.seq.Seed))
	if werr := os.WriteFile(path, []byte(replay.JSON()), 0o600); werr != nil {
		r.t.Logf("cannot write the replay: %v", werr)
	}
	r.sum.violated(Violation{Seed: r.seq.Seed, Step: step, Oracle: name, Detail: err.Error(), Replay: path})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.t.Fatalf("seed %d, step %d: invariant %q violated: %v\nfleet: %v\n%s\nreplay with EXPLORE_REPLAY=%s:\n%s",
		r.seq.Seed, step, name, err, r.st.Fleet.IDs(), r.st.Describe(ctx), path, replay.JSON())
}
