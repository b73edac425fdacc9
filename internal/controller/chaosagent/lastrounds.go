package chaosagent

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// lastRounds holds each agent's status as its last round left it. The managed
// reconciler reads agents from a cache: a reconcile that follows a round
// closely can see the agent as it was before the round, find a round due and
// run a second one at once (and its status write then conflicts and is lost:
// docs/architecture.md, "Write order"). Recalling the last round's
// status in Observe prevents both within this process. It is lost on
// a restart and is not another holder's: what keeps another holder from
// running a round again is the round's record in status, written before it
// acts (round.go).
type lastRounds struct {
	mu    sync.Mutex
	byUID map[types.UID]v1alpha1.ChaosAgentObservation
}

func newLastRounds() *lastRounds {
	return &lastRounds{byUID: map[types.UID]v1alpha1.ChaosAgentObservation{}}
}

// recall replaces the agent's status with the remembered one when that is
// newer.
func (m *lastRounds) recall(ca *v1alpha1.ChaosAgent) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.byUID[ca.GetUID()]; ok && o.RoundsRun > ca.Status.AtProvider.RoundsRun {
		o.DeepCopyInto(&ca.Status.AtProvider)
	}
}

func (m *lastRounds) remember(ca *v1alpha1.ChaosAgent) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byUID[ca.GetUID()] = *ca.Status.AtProvider.DeepCopy()
}

func (m *lastRounds) forget(ca *v1alpha1.ChaosAgent) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byUID, ca.GetUID())
}
