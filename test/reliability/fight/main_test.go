// Package fight tests how the provider behaves when it is not alone: other
// clients fight it over the objects it manages, and a ChaosAgent runs in a
// cluster of many namespaces. Each test counts the provider's writes
// (testenv.RequestLog) against a real API server.
package fight

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

// poll is far longer than any test: every write a test sees was caused by a
// watch event, and every write it counts has a reason.
const poll = time.Hour

// wait is how long a test waits for the provider to react, generously: the
// machine may be loaded.
const wait = 60 * time.Second

// fightConfig is the ClusterProviderConfig of the fight tests: it reaches the
// fight-* namespaces.
const fightConfig = "fight"

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, poll, func(e *testenv.Env) { env = e }, func(ctx context.Context) error {
		return env.Client.Create(ctx, &v1alpha1.ClusterProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Name: fightConfig},
			Spec: v1alpha1.ClusterProviderConfigSpec{
				Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
				Reach:       &v1alpha1.Reach{Namespaces: []string{"fight-*"}},
			},
		})
	}))
}

// edit is what a second client does: read, change, write back with a plain
// update under its own field manager, retrying when the provider wrote in
// between.
func edit(t *testing.T, o client.Object, mutate func()) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		mutate()
		return env.Client.Update(context.Background(), o, client.FieldOwner("fighter"))
	})
	if err != nil {
		t.Fatalf("the fighter cannot update %s: %v", o.GetName(), err)
	}
}

// writesSince returns the provider's writes after the first n whose path
// contains every one of parts.
func writesSince(n int, parts ...string) []string {
	all := env.Requests.Writes()
	var out []string
	for _, w := range all[n:] {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(w, p)
		}
		if all {
			out = append(out, w)
		}
	}
	return out
}

// mark is where the request log is now.
func mark() int { return len(env.Requests.Writes()) }

// writesNothingMore makes the provider reconcile mr once more and checks that it wrote
// nothing to a path containing parts: a converged managed resource must not.
// A label on mr brings the reconcile; the check waits until its controller
// has finished it and nothing is queued, so "nothing written" is what that
// reconcile did, not a quiet moment.
func writesNothingMore(t *testing.T, what string, mr client.Object, kind string, parts ...string) {
	t.Helper()
	controller := managed.ControllerName(kind)
	testenv.WaitIdle(t, wait)
	n := mark()
	before, err := testenv.Reconciles(controller)
	if err != nil {
		t.Fatal(err)
	}
	poke(t, mr)
	after := testenv.WaitReconciled(t, wait, controller, before)
	if w := writesSince(n, parts...); len(w) > 0 {
		t.Errorf("%s: the provider wrote %d times in %v reconciles once the fighter stopped: %v", what, len(w), after-before, w)
	}
}

// poke sets a label on mr that changes from call to call, which makes its
// controller reconcile it.
func poke(t *testing.T, mr client.Object) {
	t.Helper()
	pokes++
	if err := env.Client.Patch(context.Background(), mr, client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{"fight.example.com/poked":"%d"}}}`, pokes)))); err != nil {
		t.Fatalf("cannot label %s: %v", mr.GetName(), err)
	}
}

var pokes int
