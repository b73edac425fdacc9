// Package explore runs seeded, reproducible random sequences of operations
// and faults against the provider on a real API server (envtest), with the
// provider in-process as sharded replicas, and checks after each step and at
// quiescence checkpoints the invariants that CopyRule and ConfigRollout
// promise. A sequence is a seed and its operations: it serializes to JSON and
// replays exactly (EXPLORE_REPLAY). docs/development.md, "The explorer", says
// how to run it and what each oracle holds.
package explore
