package explore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// The fixed seed set make test runs: small enough for a loaded 2-core
// machine, different from the corpus's seeds.
const (
	defaultSeed      = 1
	defaultSequences = 3
	defaultSteps     = 20
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	e, err := testenv.StartWith(testenv.Options{ProviderCRDs: true, Restartable: true, CompactionInterval: Compaction})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Stop() //nolint:errcheck // Best effort at exit.
	if err := prepare(e); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env = e
	return m.Run()
}

// env is the API server TestMain started, for TestExplore alone.
var env *testenv.Env

// prepare creates the provider's namespace, applies the RBAC this repository
// ships, which the replicas run under, creates the default
// ClusterProviderConfig, and labels every denied namespace reachable: the
// config's selector reaches them, and its deny must still win.
func prepare(e *testenv.Env) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ns := range Denied() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if err := e.Client.Create(ctx, n); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
		reachable := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"clusterops.io/reachable":"true"}}}`))
		if err := e.Client.Patch(ctx, n, reachable); err != nil {
			return err
		}
	}
	if err := testenv.ApplyShippedRBAC(ctx, e.Client); err != nil {
		return err
	}
	_, err := testenv.ApplyFile(ctx, e.Client, testenv.RepoRoot()+"/examples/providerconfig/clusterproviderconfig.yaml")
	return err
}

// TestExplore replays the corpus (testdata/corpus/*.json) and runs the
// sequences of the fixed seed set, or EXPLORE_SEQUENCES sequences of
// EXPLORE_STEPS steps from EXPLORE_SEED on; EXPLORE_REPLAY=<file> runs that
// sequence alone. EXPLORE_RESULTS=<file> receives a summary as JSON.
func TestExplore(t *testing.T) {
	start, sum := time.Now(), NewSummary()
	if path := os.Getenv("EXPLORE_RESULTS"); path != "" {
		t.Cleanup(func() {
			if err := sum.Write(path, start); err != nil {
				t.Error(err)
			}
		})
	}
	seqs, err := sequences()
	if err != nil {
		t.Fatal(err)
	}
	budget := shrinkBudget()
	for _, s := range seqs {
		t.Run(s.name, func(t *testing.T) { Run(t, env, s.seq, sum, budget) })
	}
}

type named struct {
	name string
	seq  Sequence
}

// sequences are what TestExplore runs, by name.
func sequences() ([]named, error) {
	if path := os.Getenv("EXPLORE_REPLAY"); path != "" {
		s, err := ReadSequence(path)
		if err == nil {
			err = s.Check()
		}
		return []named{{"replay/" + filepath.Base(path), s}}, err
	}
	var out []named
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil {
		return nil, err
	}
	_, long := os.LookupEnv("EXPLORE_SEED")
	for _, f := range files {
		if long {
			break
		}
		s, err := ReadSequence(f)
		if err == nil {
			err = s.Check()
		}
		if err != nil {
			return nil, err
		}
		out = append(out, named{"corpus/" + filepath.Base(f), s})
	}
	seed, n, steps := envInt("EXPLORE_SEED", defaultSeed), envInt("EXPLORE_SEQUENCES", defaultSequences), envInt("EXPLORE_STEPS", defaultSteps)
	for i := range n {
		s := Generate(uint64(seed+i), steps)
		out = append(out, named{fmt.Sprintf("seed/%d", s.Seed), s})
	}
	return out, nil
}

// shrinkBudget is how long a failing sequence may be shrunk: EXPLORE_SHRINK
// (a duration, 0 to not shrink), else 3 minutes for the fixed set, whose
// package timeout is short, and 15 for a long run or a replay.
func shrinkBudget() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("EXPLORE_SHRINK")); err == nil {
		return d
	}
	_, long := os.LookupEnv("EXPLORE_SEED")
	_, replay := os.LookupEnv("EXPLORE_REPLAY")
	if long || replay {
		return 15 * time.Minute
	}
	return 3 * time.Minute
}

// envInt is the environment variable name as a positive number, or def.
func envInt(name string, def int) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil || n < 0 {
		return def
	}
	return n
}
