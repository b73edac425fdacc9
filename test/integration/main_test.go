// Package integration tests what users see, against a real API server with the
// provider's CRDs and controllers running in-process.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	os.Exit(func() int {
		var err error
		if env, err = testenv.Start(true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer env.Stop() //nolint:errcheck // Best effort at exit.
		// The default ClusterProviderConfig comes from the example users read.
		if _, err := testenv.ApplyFile(context.Background(), env.Client, filepath.Join(testenv.RepoRoot(), "examples", "providerconfig", "clusterproviderconfig.yaml")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if _, err := env.RunProvider(ctx, poll); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}
