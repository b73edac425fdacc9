// Package managedkind holds what the controllers of every managed resource kind
// share: the reconciler options and the controller wiring.
//
// # Write order
//
// Every kind runs crossplane-runtime's managed reconciler (v2.4.0,
// pkg/reconciler/managed), which calls the kind's external client and writes
// the managed resource in a fixed order. One reconcile of a managed resource
// that is not being deleted:
//
//  1. reads it from the manager's cache (which may be a few milliseconds
//     behind the API server);
//  2. Connect: target.Connector builds a new external client, for this
//     reconcile only;
//  3. Observe, which may change status in memory;
//  4. publishes connection details (a Secret, not the managed resource);
//  5. adds its finalizer when it lacks it (so on its first reconcile): an
//     Update of the whole managed resource;
//  6. if Observe reported the resource missing: sets the create-pending
//     annotation (an Update; on a conflict Create is not called), Create,
//     then the create-succeeded (or create-failed) annotation (an Update that,
//     on a conflict, reads the managed resource again and retries), and asks
//     for the next reconcile at once, unless Create said its readiness
//     follows by event (ReadinessFollows): then the next is the poll, or
//     that event;
//  7. otherwise, if Observe reported it not up to date and the management
//     policies allow it, Update;
//  8. last, one status update of the managed resource: what Observe, Create
//     or Update set in memory, plus the Synced condition (an error, if a step
//     failed; then the reconcile is retried with backoff).
//
// Deletion is Observe, then Delete while Observe reports the resource exists
// (status updated, reconcile requeued), then the finalizer's removal, with no
// status update after it.
//
// An Update answers with the stored object, status included, and the
// reconciler decodes that answer into the managed resource it holds in memory.
// noOpSkippingClient puts the status it was sent back, so the status Observe
// set survives steps 5 and 6. Still, for every kind:
//
//   - State goes from Observe to Create or Update as data, in a field of the
//     external client (CopyRule's plan, ConfigRollout's observed status): the
//     client lives for one reconcile, so the field holds exactly what this
//     reconcile's Observe found, and never leaks into the next one. Status
//     is for users, not the channel between the two calls.
//   - Status written in Create stands until the next Observe, which, after a
//     create whose readiness follows, is the readiness event's: Create sets
//     what that Observe sets too, from the objects as written. It is not to
//     be relied on beyond: step 6's retry reads the managed resource again,
//     which replaces it with the stored status (the conflict then brings the
//     next reconcile at once). What must be counted (ImmortalContainer's
//     starts) is counted from the objects themselves, once per object UID,
//     so Create and the Observe after it never count one twice.
//   - Status written anywhere is lost when step 8 meets a conflict (the
//     managed resource changed since step 1): the reconciler drops it and
//     requeues, while the changes Create or Update made outside stand. So
//     what happened outside is read back from outside, or, for what cannot
//     be, recorded in status before acting with the version read (a
//     ChaosAgent's round under way), so that no holder acts on it twice.
//   - Observe runs on every reconcile (polls, watch events, a requeue after
//     a create), so an event recorded there is recorded each time: record
//     one when the state it reports changes, judged by data in status (the
//     reason of a condition, as ChaosAgent's Acting events are), not by
//     comparing message text.
//   - Observe reports a resource missing only when Create has something to
//     make: a kind whose external resource cannot be missing (ChaosAgent,
//     ConfigRollout, CopyRule) always reports a living managed resource's as
//     existing, and its Create does nothing.
//   - Writes of the managed resource's annotations and finalizer are events of
//     it too; desiredStateChanged keeps them from starting reconciles of
//     their own.
package managedkind
