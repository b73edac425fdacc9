// Package reliability tests how the provider meets bad input: specs the API
// server must refuse, runtime problems it must report without crashing or
// retrying in a storm, and Secrets whose bytes must never leave the objects
// they live in. It runs against a real API server with the controllers
// in-process, as test/integration does.
package reliability

import (
	"os"
	"testing"
	"time"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

// logs holds everything the provider logged, at debug level.
var logs = &testenv.SyncBuffer{}

// poll is far longer than any test: whatever a test sees happen, a watch (or
// a retry after an error) made happen.
const poll = time.Hour

// wait is how long a test waits for the provider to react, generous for a
// loaded machine.
const wait = 60 * time.Second

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, poll, func(e *testenv.Env) { env, e.Log = e, logs }, nil))
}
