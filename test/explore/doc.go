// Package explore runs seeded, reproducible random sequences of operations
// and faults against the provider on a real API server (envtest), with the
// provider in-process as sharded replicas, and checks after each step and at
// quiescence checkpoints the invariants that every kind promises: CopyRule,
// ConfigRollout, AppBundle, ImmortalContainer and ChaosAgent, across
// namespaces that come and go, reach edits, kill switches and Observe. A
// sequence is a seed and its operations: it serializes to JSON and replays
// exactly (EXPLORE_REPLAY); a failing one is shrunk to a minimal replay.
// docs/development.md, "The explorer", says how to run it, what each
// operation does and what each oracle holds.
package explore
