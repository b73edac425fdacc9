package process

import (
	"context"
	"testing"
	"time"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// faultScale multiplies the fleets of the fleet-wide fault scenarios: 1 in
// make test (the wave: 1,000 managed resources), 10 in make bench-faults.
var faultScale = testenv.FaultScale()

// scaled is d for the scale the scenarios run at.
var scaled = testenv.Scaled

// recordFault writes a scenario's figures for make bench-faults' report.
var recordFault = testenv.RecordFault

// times is s with k times the namespaces and the resources of each kind.
func (s waveSize) times(k int) waveSize {
	return waveSize{namespaces: s.namespaces * k, rollouts: s.rollouts * k, rules: s.rules * k, bundles: s.bundles * k}
}

// eventuallyFleet is eventually for a condition that lists the whole fleet:
// it polls less often as the fleet grows, so that the test's lists do not
// load the API server the provider works against.
func eventuallyFleet(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testenv.EventuallyEvery(t, scaled(50*time.Millisecond), timeout, what, cond)
}
