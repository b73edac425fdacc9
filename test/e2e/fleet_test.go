//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// maxReconcilesPerResource is issue #17's target: a managed resource
// converges in at most this many reconciles, however often what it made
// changes status on the way to Ready.
const maxReconcilesPerResource = 3

// A fleet counts what creating size managed resources of one kind in one
// namespace costs the in-process provider: its controller's reconciles and
// the requests it and its manager sent in the namespace.
type fleet struct {
	env        *testenv.Env
	ns         string
	size       int
	controller string
	// list returns an empty list of the kind.
	list func() client.ObjectList

	before                    float64
	requests, managerRequests int
	start                     time.Time
}

// newFleet prepares to count a fleet of kind gk in namespace ns. Its
// resources go while the provider runs, before their namespace: one deleted
// with the namespace would hold its finalizer in a namespace where the
// provider can no longer write, long after the test.
func newFleet(t *testing.T, env *testenv.Env, ns, groupKind string, size int, obj client.Object, list func() client.ObjectList) *fleet {
	t.Helper()
	t.Cleanup(func() {
		_ = env.Client.DeleteAllOf(context.Background(), obj, client.InNamespace(ns))
		testenv.Eventually(t, 2*time.Minute, "the fleet to be deleted", func(ctx context.Context) (bool, error) {
			l := list()
			err := env.Client.List(ctx, l, client.InNamespace(ns))
			return meta.LenList(l) == 0, err
		})
	})
	return &fleet{env: env, ns: ns, size: size, controller: managed.ControllerName(groupKind), list: list}
}

// reconciles is how many reconciles the kind's controller has run, by
// controller-runtime's metric.
func (f *fleet) reconciles(t *testing.T) float64 {
	t.Helper()
	n, err := testenv.Reconciles(f.controller)
	if err != nil {
		t.Fatalf("cannot gather metrics: %v", err)
	}
	return n
}

// begin starts counting once the provider is idle, so that what an earlier
// test left does not count.
func (f *fleet) begin(t *testing.T) {
	t.Helper()
	testenv.WaitIdle(t, 2*time.Minute)
	f.before = f.reconciles(t)
	f.requests, f.managerRequests = f.env.Requests.Len(), f.env.ManagerWrites.Len()
	f.start = time.Now()
}

// allReady waits for every resource of the fleet to be Ready.
func (f *fleet) allReady(t *testing.T, what string) {
	t.Helper()
	testenv.Eventually(t, 3*time.Minute, what, func(ctx context.Context) (bool, error) {
		l := f.list()
		if err := f.env.Client.List(ctx, l, client.InNamespace(f.ns)); err != nil {
			return false, err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return false, err
		}
		ready := 0
		for _, o := range items {
			if c, ok := o.(interface {
				GetCondition(xpv2.ConditionType) xpv2.Condition
			}); ok && c.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
				ready++
			}
		}
		if ready < f.size {
			return false, fmt.Errorf("%d of %d Ready", ready, f.size)
		}
		return true, nil
	})
}

// converged waits for the fleet to be Ready, reports what it cost to get
// there and once settled, and fails when getting to Ready took more than
// maxReconcilesPerResource reconciles per resource. Trailing events of what
// the resources made (a last status write) may still arrive after Ready;
// settledToo asserts that they did not reconcile either.
func (f *fleet) converged(t *testing.T, noun string, settledToo bool) {
	t.Helper()
	f.allReady(t, fmt.Sprintf("all %d %s to be Ready", f.size, noun))
	toReady := f.reconciles(t) - f.before
	took := time.Since(f.start)
	byVerb := countByVerb(append(f.env.Requests.Since(f.requests), f.env.ManagerWrites.Since(f.managerRequests)...), "/namespaces/"+f.ns+"/")
	testenv.WaitIdle(t, 2*time.Minute)
	settled := f.reconciles(t) - f.before
	n := float64(f.size)
	t.Logf("%d %s Ready in %s: %.2f reconciles each to Ready, %.2f once settled; requests each to Ready (provider and its manager, in the namespace): %s",
		f.size, noun, took.Round(time.Millisecond), toReady/n, settled/n, perResource(byVerb, f.size))
	if per := toReady / n; per > maxReconcilesPerResource {
		t.Errorf("%.2f reconciles per resource from create to Ready, want at most %d", per, maxReconcilesPerResource)
	}
	if per := settled / n; settledToo && per > maxReconcilesPerResource {
		t.Errorf("%.2f reconciles per resource once settled, want at most %d", per, maxReconcilesPerResource)
	}
}

// countByVerb counts the requests whose path contains part (a namespace's
// path) by method and resource, such as "PUT appbundles/status".
func countByVerb(requests []string, part string) map[string]int {
	out := map[string]int{}
	for _, r := range requests {
		method, path, _ := strings.Cut(r, " ")
		path, _, _ = strings.Cut(path, "?")
		_, rest, ok := strings.Cut(path, part)
		if !ok {
			continue
		}
		segs := strings.Split(rest, "/")
		res := segs[0]
		if len(segs) > 2 {
			res += "/" + segs[2]
		}
		out[method+" "+res]++
	}
	return out
}

// perResource says the requests per resource, in all and by method and
// resource.
func perResource(byVerb map[string]int, n int) string {
	keys := make([]string, 0, len(byVerb))
	total := 0
	for k, c := range byVerb {
		keys = append(keys, k)
		total += c
	}
	sort.Strings(keys)
	parts := []string{fmt.Sprintf("%.2f in all", float64(total)/float64(n))}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(byVerb[k])/float64(n)))
	}
	return strings.Join(parts, ", ")
}
