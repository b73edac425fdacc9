package explore

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"

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

	// OpEditBundle sets AppBundle app's image to Value, and its Service to
	// ClusterIP on port 80 when T is 1, to none when T is 0.
	OpEditBundle = "editBundle"
	// OpDeleteBundle deletes AppBundle app (its claim stays: Retain).
	OpDeleteBundle = "deleteBundle"
	// OpCreateBundle creates AppBundle app again, once the deleted one is
	// gone; it takes over its retained claim.
	OpCreateBundle = "createBundle"
	// OpDeleteChild deletes app's object of Kind: Deployment,
	// PersistentVolumeClaim (its pvc-protection finalizer removed, as the
	// controller envtest lacks would) or Service.
	OpDeleteChild = "deleteChild"
	// OpEditChild sets the image of app's Deployment to Value (drift).
	OpEditChild = "editChild"
	// OpEditImmortal sets ImmortalContainer immortal's image to Value: its
	// pod is replaced.
	OpEditImmortal = "editImmortal"
	// OpDeleteImmortal deletes ImmortalContainer immortal (and so its pod).
	OpDeleteImmortal = "deleteImmortal"
	// OpCreateImmortal creates ImmortalContainer immortal again, once the
	// deleted one is gone.
	OpCreateImmortal = "createImmortal"
	// OpDeletePod deletes immortal's pod.
	OpDeletePod = "deletePod"
	// OpEndPod marks immortal's pod Failed, as a kubelet reports a crash.
	OpEndPod = "endPod"
	// OpKillSwitch sets (T 1) or lifts (T 0) the chaos.clusterops.io/stop
	// annotation of the sequence's ClusterProviderConfig, which ChaosAgent
	// chaos uses.
	OpKillSwitch = "killSwitch"
	// OpExclude puts (T 1) the chaos agent's second target namespace into
	// its excludedNamespaces, or takes it out (T 0).
	OpExclude = "exclude"
	// OpFeed gives the chaos agent victims again in its own namespace (J 0)
	// or its second target (J 1): a pod, a Deployment of one replica and a
	// ConfigMap, all labelled as victims.
	OpFeed = "feed"
	// OpDeleteAgent deletes ChaosAgent chaos (which reverts what it
	// changed).
	OpDeleteAgent = "deleteAgent"
	// OpCreateAgent creates ChaosAgent chaos again, once the deleted one is
	// gone.
	OpCreateAgent = "createAgent"
	// OpDeleteNamespace deletes the flux namespace, a listed target of every
	// rule-j, with its contents, as the namespace controller envtest lacks
	// would.
	OpDeleteNamespace = "deleteNamespace"
	// OpCreateNamespace creates the flux namespace again.
	OpCreateNamespace = "createNamespace"
	// OpDeny adds denyable namespace T (target 0 to 2, 3 the chaos agent's
	// second target) to the deniedNamespaces of the sequence's
	// ClusterProviderConfig.
	OpDeny = "deny"
	// OpAllow removes denyable namespace T from deniedNamespaces again.
	OpAllow = "allow"
	// OpRevoke deletes the provider's ClusterRoleBinding of what the kinds
	// do to ConfigMaps, Secrets, pods, workloads and Leases for Millis
	// milliseconds, and applies it again, as an administrator's slip does:
	// every list, write and Lease renewal of the replicas is refused
	// meanwhile.
	OpRevoke = "revoke"
	// OpObserve switches the managed resource (Kind, J) to
	// managementPolicies [Observe] (T 1) or back to ["*"] (T 0).
	OpObserve = "observe"

	// OpPartition cuts every replica off the API server for Millis
	// milliseconds: each request fails as a refused connection does, and
	// the responses open then, watches among them, end.
	OpPartition = "partition"
	// OpRestartAPIServer stops the API server and starts it again on the
	// same port and etcd. With T 1 the replicas are cut off across the
	// restart until etcd has compacted past every revision they saw: their
	// watches cannot resume where they were, and they relist.
	OpRestartAPIServer = "restartAPIServer"
	// OpThrottle puts the provider's ServiceAccount in a priority level of
	// its own, of one nominal share (a few seats), for Millis milliseconds:
	// what does not fit queues (T 0) or is refused with 429 (T 1), as an API
	// server under load or a strict FlowSchema does.
	OpThrottle = "throttle"
	// OpRemoveCRD deletes the CRD of Kind (AppBundle, ImmortalContainer or
	// ChaosAgent, while the world's one is deleted) for Millis milliseconds
	// and installs it again.
	OpRemoveCRD = "removeCRD"
)

// Kinds an operation names: the managed resources a pin or an observe
// switches, and the AppBundle's objects a deleteChild deletes.
const (
	KindCopyRule      = "CopyRule"
	KindConfigRollout = "ConfigRollout"
	// KindAllRule is the sequence's CopyRule with allNamespaces: true.
	KindAllRule    = "AllRule"
	KindAppBundle  = "AppBundle"
	KindImmortal   = "ImmortalContainer"
	KindChaosAgent = "ChaosAgent"
	KindDeployment = "Deployment"
	KindClaim      = "PersistentVolumeClaim"
	KindService    = "Service"
)

// denyable counts the namespaces an OpDeny names: the three targets and the
// chaos agent's second target, which is the last.
const (
	denyable          = targets + 1
	chaosSecondTarget = targets
)

// The images the world's AppBundle and ImmortalContainer start with.
const (
	initialBundleImage   = "nginx:1.21"
	initialImmortalImage = "nginx:1.27"
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

// Check says which operation of s, if any, makes no sense after the ones
// before it (model.allows): a corpus file or a replay written by hand is
// checked before it runs.
func (s Sequence) Check() error {
	m := newModel(s.Seed)
	for i, op := range s.Ops {
		if !m.allows(op) {
			return errors.Errorf("operation %d, %s, makes no sense after the ones before it", i, op)
		}
		m.apply(op)
	}
	return nil
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

// model is what the generator and the oracles know of the world: which
// managed resources are live, what is switched, denied or observed, and how
// many replicas run. It follows the ops alone, never the cluster, so a seed
// always generates the same sequence and a shrunk sequence can be checked
// for ops that no longer make sense.
type model struct {
	seed         uint64
	deleted      [targets]bool
	bundleGone   bool
	immortalGone bool
	agentGone    bool
	switchOn     bool
	excluded     bool
	fluxGone     bool
	denied       [denyable]bool
	observed     map[string]bool
	replicas     int
	started      int
}

func newModel(seed uint64) *model {
	return &model{seed: seed, replicas: InitialReplicas, started: InitialReplicas, observed: map[string]bool{}}
}

// observeKey names a managed resource an OpObserve switches.
func observeKey(kind string, j int) string { return fmt.Sprintf("%s/%d", kind, j) }

// observes says whether managed resource (kind, j) is under Observe.
func (m *model) observes(kind string, j int) bool { return m.observed[observeKey(kind, j)] }

// anyDenied says whether a namespace is denied.
func (m *model) anyDenied() bool {
	for _, d := range m.denied {
		if d {
			return true
		}
	}
	return false
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

func always(w int, f func(r *rand.Rand, m *model, step int) Op) []choice {
	return []choice{{w, f}}
}

func when(ok bool, w int, f func(r *rand.Rand, m *model, step int) Op) []choice {
	if !ok {
		return nil
	}
	return []choice{{w, f}}
}

// choices are the operations the model allows now, weighted.
func (m *model) choices() []choice {
	var c []choice
	for _, group := range [][][]choice{m.copyChoices(), m.workloadChoices(), m.reachChoices(), m.fleetChoices(), m.faultChoices()} {
		for _, x := range group {
			c = append(c, x...)
		}
	}
	return c
}

// copyChoices are CopyRule's and ConfigRollout's operations.
func (m *model) copyChoices() [][]choice {
	live, gone := m.live(), m.gone()
	return [][]choice{
		always(10, func(r *rand.Rand, _ *model, step int) Op {
			return Op{Type: OpChangeSource, J: r.IntN(targets), Value: fmt.Sprintf("src-%d", step)}
		}),
		always(10, func(r *rand.Rand, _ *model, step int) Op {
			return Op{Type: OpChangeLocal, J: r.IntN(targets), Value: fmt.Sprintf("local-%d", step)}
		}),
		always(5, func(r *rand.Rand, _ *model, _ int) Op { return Op{Type: OpReplace, J: r.IntN(targets)} }),
		always(4, func(r *rand.Rand, _ *model, _ int) Op {
			return Op{Type: OpPin, Kind: []string{KindCopyRule, KindConfigRollout, KindAllRule}[r.IntN(3)], J: r.IntN(targets), Shard: r.IntN(shards)}
		}),
		when(len(live) > 0, 6, func(r *rand.Rand, m *model, _ int) Op {
			return Op{Type: OpDeleteCopy, J: pick(r, m.live()), T: r.IntN(targets)}
		}),
		when(len(live) > 0, 6, func(r *rand.Rand, m *model, step int) Op {
			return Op{Type: OpEditCopy, J: pick(r, m.live()), T: r.IntN(targets), Value: fmt.Sprintf("drift-%d", step)}
		}),
		when(len(m.deletable()) > 0, 2, func(r *rand.Rand, m *model, _ int) Op { return Op{Type: OpDeleteRule, J: pick(r, m.deletable())} }),
		when(len(gone) > 0, 6, func(r *rand.Rand, m *model, _ int) Op { return Op{Type: OpCreateRule, J: pick(r, m.gone())} }),
	}
}

// workloadChoices are AppBundle's, ImmortalContainer's and ChaosAgent's
// operations.
func (m *model) workloadChoices() [][]choice {
	return [][]choice{
		when(!m.bundleGone, 3, func(r *rand.Rand, _ *model, step int) Op {
			return Op{Type: OpEditBundle, Value: fmt.Sprintf("nginx:1.%d", 22+step), T: r.IntN(2)}
		}),
		when(!m.bundleGone, 4, func(r *rand.Rand, _ *model, _ int) Op {
			return Op{Type: OpDeleteChild, Kind: []string{KindDeployment, KindClaim, KindService}[r.IntN(3)]}
		}),
		when(!m.bundleGone, 3, func(_ *rand.Rand, _ *model, step int) Op {
			return Op{Type: OpEditChild, Value: fmt.Sprintf("drift:%d", step)}
		}),
		when(!m.bundleGone && !m.observes(KindAppBundle, 0), 1, func(*rand.Rand, *model, int) Op { return Op{Type: OpDeleteBundle} }),
		when(m.bundleGone, 4, func(*rand.Rand, *model, int) Op { return Op{Type: OpCreateBundle} }),
		when(!m.immortalGone, 2, func(_ *rand.Rand, _ *model, step int) Op {
			return Op{Type: OpEditImmortal, Value: fmt.Sprintf("nginx:1.%d", 28+step)}
		}),
		when(!m.immortalGone, 4, func(*rand.Rand, *model, int) Op { return Op{Type: OpDeletePod} }),
		when(!m.immortalGone, 3, func(*rand.Rand, *model, int) Op { return Op{Type: OpEndPod} }),
		when(!m.immortalGone && !m.observes(KindImmortal, 0), 1, func(*rand.Rand, *model, int) Op { return Op{Type: OpDeleteImmortal} }),
		when(m.immortalGone, 4, func(*rand.Rand, *model, int) Op { return Op{Type: OpCreateImmortal} }),
		always(3, func(*rand.Rand, *model, int) Op { return Op{Type: OpKillSwitch, T: b2i(!m.switchOn)} }),
		when(!m.agentGone, 3, func(*rand.Rand, *model, int) Op { return Op{Type: OpExclude, T: b2i(!m.excluded)} }),
		always(4, func(r *rand.Rand, _ *model, _ int) Op { return Op{Type: OpFeed, J: r.IntN(2)} }),
		when(m.agentDeletable(), 1, func(*rand.Rand, *model, int) Op { return Op{Type: OpDeleteAgent} }),
		when(m.agentGone, 4, func(*rand.Rand, *model, int) Op { return Op{Type: OpCreateAgent} }),
	}
}

// reachChoices are the operations on namespaces, reach and management
// policies.
func (m *model) reachChoices() [][]choice {
	return [][]choice{
		when(!m.fluxGone, 2, func(*rand.Rand, *model, int) Op { return Op{Type: OpDeleteNamespace} }),
		when(m.fluxGone, 4, func(*rand.Rand, *model, int) Op { return Op{Type: OpCreateNamespace} }),
		when(len(m.gone()) == 0 && len(m.allowedList()) > 0, 3, func(r *rand.Rand, m *model, _ int) Op { return Op{Type: OpDeny, T: pick(r, m.allowedList())} }),
		when(m.anyDenied(), 4, func(r *rand.Rand, m *model, _ int) Op { return Op{Type: OpAllow, T: pick(r, m.deniedList())} }),
		when(len(m.observable()) > 0, 3, func(r *rand.Rand, m *model, _ int) Op {
			k := m.observable()[r.IntN(len(m.observable()))]
			return Op{Type: OpObserve, Kind: k.kind, J: k.j, T: b2i(!m.observes(k.kind, k.j))}
		}),
	}
}

// fleetChoices are the operations on replicas, and pauses.
func (m *model) fleetChoices() [][]choice {
	return [][]choice{
		always(6, func(r *rand.Rand, _ *model, _ int) Op { return Op{Type: OpPause, Millis: 200 + r.IntN(1300)} }),
		always(3, func(r *rand.Rand, m *model, _ int) Op {
			return Op{Type: OpRestart, Replica: r.IntN(m.replicas), Identity: m.next()}
		}),
		when(m.replicas < maxReplicas, 2, func(_ *rand.Rand, m *model, _ int) Op { return Op{Type: OpJoin, Identity: m.next()} }),
		when(m.replicas > minReplicas, 2, func(r *rand.Rand, m *model, _ int) Op { return Op{Type: OpLeave, Replica: r.IntN(m.replicas)} }),
		// From within a renewal to past a Lease's duration (3 and 4 s).
		always(2, func(r *rand.Rand, _ *model, _ int) Op { return Op{Type: OpRevoke, Millis: 500 + r.IntN(5500)} }),
	}
}

// faultChoices are the operations on the infrastructure.
func (m *model) faultChoices() [][]choice {
	return [][]choice{
		// From within a renewal to past a Lease's duration.
		always(2, func(r *rand.Rand, _ *model, _ int) Op { return Op{Type: OpPartition, Millis: 500 + r.IntN(5500)} }),
		always(1, func(r *rand.Rand, _ *model, _ int) Op { return Op{Type: OpRestartAPIServer, T: r.IntN(2)} }),
		always(2, func(r *rand.Rand, _ *model, _ int) Op {
			return Op{Type: OpThrottle, T: r.IntN(2), Millis: 1000 + r.IntN(7000)}
		}),
		when(len(m.removable()) > 0, 1, func(r *rand.Rand, m *model, _ int) Op {
			k := m.removable()
			return Op{Type: OpRemoveCRD, Kind: k[r.IntN(len(k))], Millis: 500 + r.IntN(5500)}
		}),
	}
}

// removable are the kinds whose CRD an OpRemoveCRD may remove: those whose
// managed resource in the world is deleted.
func (m *model) removable() []string {
	var out []string
	if m.bundleGone {
		out = append(out, KindAppBundle)
	}
	if m.immortalGone {
		out = append(out, KindImmortal)
	}
	if m.agentGone {
		out = append(out, KindChaosAgent)
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
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

// deletable are the rules a deleteRule may name: live, not under Observe
// (whose deletion would leave its copies), and only while nothing is
// denied (a copy in a denied namespace is never deleted, so it would
// outlive its rule).
func (m *model) deletable() []int {
	if m.anyDenied() {
		return nil
	}
	var out []int
	for _, j := range m.live() {
		if !m.observes(KindCopyRule, j) {
			out = append(out, j)
		}
	}
	return out
}

// agentDeletable: the agent may be deleted while nothing keeps it from
// reverting what it changed: no switch, exclusion, denial or Observe.
func (m *model) agentDeletable() bool {
	return !m.agentGone && !m.switchOn && !m.excluded && !m.denied[chaosSecondTarget] && !m.observes(KindChaosAgent, 0)
}

// anyDeniedTarget says whether a target namespace of the rules is denied.
func (m *model) anyDeniedTarget() bool {
	for t := range targets {
		if m.denied[t] {
			return true
		}
	}
	return false
}

// allowedList are the denyable namespaces not denied now.
func (m *model) allowedList() []int {
	var out []int
	for t, d := range m.denied {
		if !d {
			out = append(out, t)
		}
	}
	return out
}

func (m *model) deniedList() []int {
	var out []int
	for t, d := range m.denied {
		if d {
			out = append(out, t)
		}
	}
	return out
}

type mref struct {
	kind string
	j    int
}

// observable are the live managed resources an OpObserve may switch.
func (m *model) observable() []mref {
	var out []mref
	for _, j := range m.live() {
		out = append(out, mref{KindCopyRule, j})
	}
	for j := range targets {
		out = append(out, mref{KindConfigRollout, j})
	}
	if !m.bundleGone {
		out = append(out, mref{KindAppBundle, 0})
	}
	if !m.immortalGone {
		out = append(out, mref{KindImmortal, 0})
	}
	if !m.agentGone {
		out = append(out, mref{KindChaosAgent, 0})
	}
	return out
}

// next is the identity of the next replica to start.
func (m *model) next() string {
	m.started++
	return Identity(m.seed, m.started-1)
}

// allows says whether op makes sense after the ops the model has seen: what
// it creates is gone, what it names exists, its replica index is in range.
// A shrunk sequence keeps only the ops it allows.
func (m *model) allows(op Op) bool {
	switch op.Type {
	case OpDeleteRule:
		return !m.deleted[op.J] && !m.anyDenied() && !m.observes(KindCopyRule, op.J)
	case OpCreateRule:
		return m.deleted[op.J]
	case OpDeleteCopy, OpEditCopy:
		return !m.deleted[op.J]
	case OpEditBundle, OpDeleteChild, OpEditChild:
		return !m.bundleGone
	case OpDeleteBundle:
		return !m.bundleGone && !m.observes(KindAppBundle, 0)
	case OpCreateBundle:
		return m.bundleGone
	case OpEditImmortal, OpDeletePod, OpEndPod:
		return !m.immortalGone
	case OpDeleteImmortal:
		return !m.immortalGone && !m.observes(KindImmortal, 0)
	case OpCreateImmortal:
		return m.immortalGone
	case OpKillSwitch:
		return (op.T == 1) != m.switchOn
	case OpExclude:
		return !m.agentGone && (op.T == 1) != m.excluded
	case OpDeleteAgent:
		return m.agentDeletable()
	case OpCreateAgent:
		return m.agentGone
	case OpDeleteNamespace:
		return !m.fluxGone
	case OpCreateNamespace:
		return m.fluxGone
	case OpDeny:
		return op.T >= 0 && op.T < denyable && !m.denied[op.T] && len(m.gone()) == 0
	case OpAllow:
		return op.T >= 0 && op.T < denyable && m.denied[op.T]
	case OpObserve:
		return m.mayObserve(op)
	case OpRestart, OpLeave:
		return op.Replica >= 0 && op.Replica < m.replicas && (op.Type == OpRestart || m.replicas > minReplicas)
	case OpJoin:
		return m.replicas < maxReplicas
	case OpRemoveCRD:
		return slices.Contains(m.removable(), op.Kind)
	}
	return true
}

func (m *model) mayObserve(op Op) bool {
	if (op.T == 1) == m.observes(op.Kind, op.J) {
		return false
	}
	for _, k := range m.observable() {
		if k.kind == op.Kind && k.j == op.J {
			return true
		}
	}
	return false
}

// apply moves the model past op.
func (m *model) apply(op Op) {
	switch op.Type {
	case OpDeleteRule:
		m.deleted[op.J] = true
	case OpCreateRule:
		m.deleted[op.J] = false
	case OpDeleteBundle, OpCreateBundle:
		m.bundleGone = op.Type == OpDeleteBundle
	case OpDeleteImmortal, OpCreateImmortal:
		m.immortalGone = op.Type == OpDeleteImmortal
	case OpDeleteAgent, OpCreateAgent:
		m.agentGone = op.Type == OpDeleteAgent
		m.excluded = false
	case OpKillSwitch:
		m.switchOn = op.T == 1
	case OpExclude:
		m.excluded = op.T == 1
	case OpDeleteNamespace, OpCreateNamespace:
		m.fluxGone = op.Type == OpDeleteNamespace
	case OpDeny, OpAllow:
		m.denied[op.T] = op.Type == OpDeny
	case OpObserve:
		m.observed[observeKey(op.Kind, op.J)] = op.T == 1
	case OpJoin:
		m.replicas++
	case OpLeave:
		m.replicas--
	}
}

func pick(r *rand.Rand, from []int) int { return from[r.IntN(len(from))] }

// Generate is the sequence of steps operations that seed gives. Every
// operation it draws is one the model allows (TestGenerateDrawsOnlyAllowed).
func Generate(seed uint64, steps int) Sequence {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) // The seed alone decides the sequence.
	m := newModel(seed)
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
