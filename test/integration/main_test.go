// Package integration tests what users see, against a real API server with the
// provider's CRDs and controllers running in-process.
package integration

import (
	"os"
	"testing"
	"time"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

// poll is far longer than any test: whatever a test sees happen, a watch made happen.
const poll = time.Hour

// wait is how long a test waits for the provider to react.
const wait = 30 * time.Second

func TestMain(m *testing.M) {
	// The default ClusterProviderConfig comes from the example users read.
	os.Exit(testenv.Main(m, poll, func(e *testenv.Env) { env = e }, nil))
}
