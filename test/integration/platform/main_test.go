// Package platform checks the platform API examples (examples/platform)
// against a real API server with Crossplane core's CRDs and the provider's:
// every file applies, the XRDs generate CRDs (with Crossplane's own generator)
// that accept the example claims and XRs and refuse bad ones, and what
// function-clusterops composes from each example passes the provider's CRDs.
// Crossplane core itself does not run here; the e2e tier runs it.
package platform

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(func() int {
		crds, err := testenv.CrossplaneCRDs()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if env, err = testenv.StartWith(testenv.Options{ProviderCRDs: true, CRDDirs: []string{crds}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer env.Stop() //nolint:errcheck // Best effort at exit.
		_ = context.Background()
		return m.Run()
	}())
}
