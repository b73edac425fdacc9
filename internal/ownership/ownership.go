// Package ownership says how this provider marks what its managed resources
// make, how it recognises it again, and what a managed resource may do with an
// object that stands where one of its own would: the one rule every kind
// follows so that nothing a user owns is taken over or deleted without an
// explicit policy, and an object in the way never keeps a managed resource
// from being deleted.
//
// A Mark is the label each kind puts on what its managed resources make
// (ByName: ImmortalContainer's pods, AppBundle's objects, ChaosAgent's
// backup; ByUID: CopyRule's copies, which live in other namespaces). Only a
// marked object is its managed resource's own: it may write and delete it,
// and it caches, watches and lists by the mark. What the provider creates
// (copies aside: they keep their source's labels) also carries
// LabelManagedBy, which tells people and tools who made it but names no
// managed resource, so it proves nothing to Decide.
//
// ConfigRollout's lock (configrollout.AnnotationLock) is not a Mark: the
// workloads it annotates are the user's, never made, adopted or deleted by a
// rollout. The lock only says which rollout, of several that could, writes
// the one field a rollout writes (the pod template's hash), and it is removed,
// not the workload, when the rollout goes. Decide does not apply to it (a
// locked workload is not in the way of anything), so it stays with
// ConfigRollout, as an annotation: locks are found through an index of the
// provider's metadata cache, never by a label selector.
package ownership

// A Stake is what a managed resource may do with an existing object named like
// one it manages.
type Stake int

const (
	// None: absent, or someone else's that the managed resource leaves alone:
	// it does not want it, or it is being deleted.
	None Stake = iota
	// Mine: the managed resource made it or adopted it (it carries its mark),
	// or adopts it now. It may write and delete it.
	Mine
	// InTheWay: someone else's, wanted by the managed resource and not to be
	// adopted. A conflict to report; it is never written.
	InTheWay
)

// Facts are what is known of an object named like one a managed resource
// manages.
type Facts struct {
	// Exists: there is such an object.
	Exists bool
	// Marked: it carries the managed resource's ownership mark.
	Marked bool
	// Wanted: the managed resource's spec asks for this object now.
	Wanted bool
	// Adopt: the spec allows taking over an existing object it wants.
	Adopt bool
	// Deleting: the managed resource is being deleted.
	Deleting bool
}

// Decide returns the managed resource's stake in an object. An object it
// marked is its own whatever its spec says (so one no longer wanted can be
// removed); an unmarked one is taken only when wanted and adoption is allowed,
// and never while the managed resource is being deleted, which removes only
// what it marked.
func Decide(f Facts) Stake {
	switch {
	case !f.Exists:
		return None
	case f.Marked:
		return Mine
	case f.Deleting || !f.Wanted:
		return None
	case f.Adopt:
		return Mine
	default:
		return InTheWay
	}
}
