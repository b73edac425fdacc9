// Package managedkind holds what the controllers of every managed resource
// kind share: the reconciler options, the controller wiring (Setup), and the
// client through which crossplane-runtime's managed reconciler reads and
// writes the managed resource.
//
// The reconciler writes a managed resource in a fixed order (finalizer,
// create annotations, Create or Update, one status update last), and each
// kind's external client lives for one reconcile. So every kind passes state
// from Observe to Create or Update in a field of its external client, never
// through status; reads back from outside what a lost status write would
// forget, or records it in status before acting; and records an event when
// the state in status changes, not on every Observe. docs/architecture.md,
// "Write order", has the steps and the reasons.
package managedkind
