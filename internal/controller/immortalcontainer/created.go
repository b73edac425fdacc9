package immortalcontainer

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// maxUnrecorded bounds the pods remembered per ImmortalContainer whose
// start no status read back has shown yet: more in a row means every status
// write keeps failing, and the oldest are the first to be forgotten.
const maxUnrecorded = 8

// createdPods remembers, per ImmortalContainer (by UID), the pods Create
// made whose start a status read back has not shown yet. status.startTimes
// counts the pods created; Create counts its pod in the status the
// reconcile then writes, and that write can be lost (a conflict on
// crossplane-runtime's create-succeeded annotation update, after which the
// reconcile ends with the status it read). A pod that is then deleted, or
// ends and is replaced, before an Observe sees it would never be counted.
// Observe counts such a pod from here. The memory lives in the replica: a
// replica that stops between a create and its status write still loses
// that start.
type createdPods struct {
	mu   sync.Mutex
	byIC map[types.UID][]createdPod
}

// A createdPod is a pod Create made, and the count status.startTimes
// reaches once it holds that pod's start.
type createdPod struct {
	uid   types.UID
	at    metav1.Time
	count int64
}

func newCreatedPods() *createdPods { return &createdPods{byIC: map[types.UID][]createdPod{}} }

// made remembers that Create made pod uid, created at at, for ic, whose
// status, o, now counts it.
func (c *createdPods) made(ic types.UID, uid types.UID, at metav1.Time, o *v1alpha1.ImmortalContainerObservation) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byIC[ic] = append(c.byIC[ic], createdPod{uid: uid, at: at, count: o.StartTimes})
	if ps := c.byIC[ic]; len(ps) > maxUnrecorded {
		c.byIC[ic] = ps[len(ps)-maxUnrecorded:]
	}
}

// count adds to o, the status as read, the starts of the pods Create made
// that it does not count yet, oldest first, except current's, which seen
// counts. A pod it counts already is forgotten. The pod UID in status stays
// as read: a pod gone unseen is no pod another writer deleted.
func (c *createdPods) count(ic types.UID, o *v1alpha1.ImmortalContainerObservation, current types.UID) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var keep []createdPod
	for _, p := range c.byIC[ic] {
		switch {
		case o.StartTimes >= p.count:
			continue // Counted in what was read.
		case current == "" || p.uid != current:
			recordStart(o, p.at)
		}
		keep = append(keep, p)
	}
	if len(keep) == 0 {
		delete(c.byIC, ic)
		return
	}
	c.byIC[ic] = keep
}

// forget drops what is remembered of ic.
func (c *createdPods) forget(ic types.UID) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byIC, ic)
}
