package explore

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Operation types. Each is one step of a sequence.
const (
	// OpChangeSource sets source ConfigMap conf-J's data to Value: rule-J
	// copies it into every target namespace.
	OpChangeSource = "changeSource"
	// OpChangeLocal sets ConfigMap local in target namespace J to Value:
	// ConfigRollout ro-J rolls Deployment web-J.
	OpChangeLocal = "changeLocal"
	// OpReplace updates Deployment web-J without the rollout's lock
	// annotation, as `kubectl replace` or a GitOps replace does.
	OpReplace = "replace"
	// OpDeleteCopy deletes rule-J's copy in target namespace T.
	OpDeleteCopy = "deleteCopy"
	// OpEditCopy sets rule-J's copy in target namespace T to Value (drift).
	OpEditCopy = "editCopy"
	// OpDeleteRule deletes CopyRule rule-J.
	OpDeleteRule = "deleteRule"
	// OpCreateRule creates CopyRule rule-J again, once the deleted one is gone.
	OpCreateRule = "createRule"
	// OpPin labels a managed resource (Kind, J) with shard Shard.
	OpPin = "pin"
	// OpRestart stops replica Replica and starts one named Identity.
	OpRestart = "restart"
	// OpJoin starts a replica named Identity.
	OpJoin = "join"
	// OpLeave stops replica Replica.
	OpLeave = "leave"
	// OpPause waits Millis milliseconds: the generator's deliberate pause,
	// so that some operations land while the provider acts on the last ones.
	OpPause = "pause"
	// OpCheckpoint waits until the liveness oracles hold, as every tenth
	// step does. The generator never draws it: corpus sequences place it
	// where a regression needs the provider caught up.
	OpCheckpoint = "checkpoint"
)

// Kinds a pin names.
const (
	KindCopyRule      = "CopyRule"
	KindConfigRollout = "ConfigRollout"
	// KindAllRule is the sequence's CopyRule with allNamespaces: true.
	KindAllRule = "AllRule"
)

// The world's size and the fleet's bounds.
const (
	targets     = 3
	shards      = 4
	minReplicas = 1
	maxReplicas = 3
)

// An Op is one step: a type and its arguments. Indexes are into the
// world's objects (J, T) and the live replicas in the order they started
// (Replica).
type Op struct {
	Type     string `json:"type"`
	J        int    `json:"j,omitempty"`
	T        int    `json:"t,omitempty"`
	Value    string `json:"value,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Shard    int    `json:"shard,omitempty"`
	Replica  int    `json:"replica,omitempty"`
	Identity string `json:"identity,omitempty"`
	Millis   int    `json:"millis,omitempty"`
}

func (o Op) String() string {
	b, _ := json.Marshal(o)
	return string(b)
}

// A Sequence is a seed and the operations run after the world's setup, with
// an optional note on what it reproduces.
type Sequence struct {
	Seed uint64 `json:"seed"`
	Note string `json:"note,omitempty"`
	Ops  []Op   `json:"ops"`
}

// JSON is the sequence as a replay file holds it.
func (s Sequence) JSON() string {
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b)
}

// ReadSequence reads a sequence from a replay or corpus file.
func ReadSequence(path string) (Sequence, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Sequence{}, errors.Wrapf(err, "cannot read sequence %s", path)
	}
	var s Sequence
	if err := json.Unmarshal(b, &s); err != nil {
		return Sequence{}, errors.Wrapf(err, "cannot decode sequence %s", path)
	}
	return s, nil
}

// model is what the generator knows of the world: which rules are live and
// which replicas run. It follows the ops alone, never the cluster, so a seed
// always generates the same sequence.
type model struct {
	seed     uint64
	deleted  [targets]bool
	replicas int
	started  int
}

// InitialReplicas is how many replicas a sequence starts with.
const InitialReplicas = 2

// Identity names the n-th replica a sequence starts: unique per seed, so
// that a sequence's replicas never take a Lease an earlier one held as
// their own.
func Identity(seed uint64, n int) string { return fmt.Sprintf("s%d-r%d", seed, n) }

type choice struct {
	weight int
	make   func(r *rand.Rand, m *model, step int) Op
}

// choices are the operations the model allows now, weighted.
func (m *model) choices() []choice {
	c := []choice{
		{14, func(r *rand.Rand, _ *model, step int) Op {
			return Op{Type: OpChangeSource, J: r.IntN(targets), Value: fmt.Sprintf("src-%d", step)}
		}},
		{14, func(r *rand.Rand, _ *model, step int) Op {
			return Op{Type: OpChangeLocal, J: r.IntN(targets), Value: fmt.Sprintf("local-%d", step)}
		}},
		{8, func(r *rand.Rand, _ *model, _ int) Op { return Op{Type: OpReplace, J: r.IntN(targets)} }},
		{6, func(r *rand.Rand, _ *model, _ int) Op {
			return Op{Type: OpPin, Kind: []string{KindCopyRule, KindConfigRollout, KindAllRule}[r.IntN(3)], J: r.IntN(targets), Shard: r.IntN(shards)}
		}},
		{6, func(r *rand.Rand, _ *model, _ int) Op { return Op{Type: OpPause, Millis: 200 + r.IntN(1300)} }},
		{4, func(r *rand.Rand, m *model, _ int) Op {
			return Op{Type: OpRestart, Replica: r.IntN(m.replicas), Identity: m.next()}
		}},
	}
	if live := m.live(); len(live) > 0 {
		c = append(c,
			choice{8, func(r *rand.Rand, m *model, _ int) Op {
				return Op{Type: OpDeleteCopy, J: pick(r, m.live()), T: r.IntN(targets)}
			}},
			choice{8, func(r *rand.Rand, m *model, step int) Op {
				return Op{Type: OpEditCopy, J: pick(r, m.live()), T: r.IntN(targets), Value: fmt.Sprintf("drift-%d", step)}
			}},
			choice{3, func(r *rand.Rand, m *model, _ int) Op { return Op{Type: OpDeleteRule, J: pick(r, m.live())} }},
		)
	}
	if gone := m.gone(); len(gone) > 0 {
		c = append(c, choice{8, func(r *rand.Rand, m *model, _ int) Op { return Op{Type: OpCreateRule, J: pick(r, m.gone())} }})
	}
	if m.replicas < maxReplicas {
		c = append(c, choice{3, func(_ *rand.Rand, m *model, _ int) Op { return Op{Type: OpJoin, Identity: m.next()} }})
	}
	if m.replicas > minReplicas {
		c = append(c, choice{3, func(r *rand.Rand, m *model, _ int) Op { return Op{Type: OpLeave, Replica: r.IntN(m.replicas)} }})
	}
	return c
}

func (m *model) live() []int { return m.rules(false) }
func (m *model) gone() []int { return m.rules(true) }

func (m *model) rules(deleted bool) []int {
	var out []int
	for j, d := range m.deleted {
		if d == deleted {
			out = append(out, j)
		}
	}
	return out
}

// next is the identity of the next replica to start.
func (m *model) next() string {
	m.started++
	return Identity(m.seed, m.started-1)
}

// apply moves the model past op.
func (m *model) apply(op Op) {
	switch op.Type {
	case OpDeleteRule:
		m.deleted[op.J] = true
	case OpCreateRule:
		m.deleted[op.J] = false
	case OpJoin:
		m.replicas++
	case OpLeave:
		m.replicas--
	}
}

func pick(r *rand.Rand, from []int) int { return from[r.IntN(len(from))] }

// Generate is the sequence of steps operations that seed gives.
func Generate(seed uint64, steps int) Sequence {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) // The seed alone decides the sequence.
	m := &model{seed: seed, replicas: InitialReplicas, started: InitialReplicas}
	s := Sequence{Seed: seed}
	for step := range steps {
		cs := m.choices()
		total := 0
		for _, c := range cs {
			total += c.weight
		}
		n := r.IntN(total)
		for _, c := range cs {
			if n < c.weight {
				op := c.make(r, m, step)
				m.apply(op)
				s.Ops = append(s.Ops, op)
				break
			}
			n -= c.weight
		}
	}
	return s
}
