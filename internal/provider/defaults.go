package provider

import "time"

// DefaultMaxRoutineRequests is --max-routine-requests' default: as many
// requests in flight as the fleet benchmark's raw client keeps, which paces a
// fleet's converge as fast as the API server takes it on 2 cores.
const DefaultMaxRoutineRequests = 32

// DefaultQuietRoutineRequests is --quiet-routine-requests' default.
const DefaultQuietRoutineRequests = 8

// DefaultOptions are the provider's defaults: cmd/provider's flags default to
// them, the test harness starts from them, and docs/operations.md's flag
// table states them (cmd/provider's tests hold the three to one another).
func DefaultOptions() Options {
	return Options{
		Namespace: "crossplane-system",
		// The kinds act on the Kubernetes API, whose priority and fairness
		// protects it, not on a cloud API with quotas: 10, the usual
		// Crossplane default, would make a 1000-namespace copy wait on the
		// client for 20 s.
		MaxReconcileRate:     100,
		MaxRoutineRequests:   DefaultMaxRoutineRequests,
		QuietRoutineRequests: DefaultQuietRoutineRequests,
		Poll:                 10 * time.Minute,
		PollJitter:           0.1,
		Sync:                 time.Hour,
		ManagementPolicies:   true,
		SafeStart:            true,
		MetricsAddr:          ":8080",
		HealthAddr:           ":8081",
		PprofAddr:            "0",
		// How fast a replica takes over from a leader that died without
		// releasing its lease: these suit a production cluster, tests
		// shorten them.
		LeaseDuration: 60 * time.Second,
		RenewDeadline: 50 * time.Second,
		RetryPeriod:   2 * time.Second,
	}
}
