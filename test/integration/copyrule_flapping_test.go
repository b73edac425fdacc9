package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestCopyRuleFollowsAFlappingSource rewrites a source every 100 ms for 5 s
// (in make bench-faults: every second for 10 minutes): its five copies end
// with its last content, each copy is written at most once per change
// (changes that come faster than a reconcile are taken together), the rule
// reads its source at most once per change, and once the source settles
// nothing more is written.
func TestCopyRuleFollowsAFlappingSource(t *testing.T) {
	ctx := context.Background()
	flapFor, every := 5*time.Second, 100*time.Millisecond
	if testenv.FaultScale() > 1 {
		flapFor, every = 10*time.Minute, time.Second
	}
	figures := map[string]float64{"flap_s": flapFor.Seconds(), "every_s": every.Seconds()}
	testenv.RecordFault(t, figures)
	src := env.Namespace(t, "copy-flap-src", nil)
	var targets []string
	for range 5 {
		targets = append(targets, env.Namespace(t, "copy-flap", nil))
	}
	env.Create(t, configMap(src, "conf", map[string]string{"k": "0"}, map[string]string{"flap": "yes"}))
	r := copyRule(t, src, "flapping", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"flap": "yes"}}, Namespaces: targets})
	env.WaitConverged(t, wait, r)
	for _, ns := range targets {
		copyHolds(t, ns, "conf", map[string]string{"k": "0"})
	}
	testenv.WaitIdle(t, wait)
	mark := env.Requests.Len()

	changes := 0
	for start := time.Now(); time.Since(start) < flapFor; time.Sleep(every) {
		changes++
		p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"k":"%d"}}`, changes))
		if err := env.Client.Patch(ctx, configMap(src, "conf", nil, nil), p); err != nil {
			t.Fatal(err)
		}
	}
	last := map[string]string{"k": fmt.Sprint(changes)}
	for _, ns := range targets {
		copyHolds(t, ns, "conf", last)
	}
	testenv.WaitIdle(t, wait)

	writes, reads := map[string]int{}, 0
	for _, q := range env.Requests.Since(mark) {
		for _, ns := range targets {
			if strings.Contains(q, "/namespaces/"+ns+"/configmaps") && !strings.HasPrefix(q, "GET ") {
				writes[ns]++
			}
		}
		if strings.HasPrefix(q, "GET /api/v1/namespaces/"+src+"/configmaps") && !strings.Contains(q, "watch=true") {
			reads++
		}
	}
	for _, ns := range targets {
		if writes[ns] == 0 || writes[ns] > changes {
			t.Errorf("copy in %s written %d times for %d changes, want 1 to %d", ns, writes[ns], changes, changes)
		}
	}
	if reads > changes {
		t.Errorf("the rule read its source %d times for %d changes, want at most one read a change", reads, changes)
	}
	t.Logf("%d changes: %v writes per copy, %d reads of the source", changes, writes, reads)
	figures["changes"], figures["source_reads"] = float64(changes), float64(reads)
	for _, ns := range targets {
		figures["most_writes_per_copy"] = max(figures["most_writes_per_copy"], float64(writes[ns]))
	}

	// Settled: nothing more is written.
	settledAt := env.Requests.Len()
	time.Sleep(2 * time.Second)
	for _, q := range env.Requests.Since(settledAt) {
		if strings.Contains(q, "/namespaces/copy-flap-") && !strings.HasPrefix(q, "GET ") {
			t.Errorf("a write after the source settled: %s", q)
		}
	}
}
