package process

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// churnSize is the fleet of TestFleetUnderChurn, make soak's short version.
var churnSize = waveSize{namespaces: 6, rollouts: 150, rules: 120, bundles: 30}

const (
	// churnRounds of changes, churnEvery apart; each changes churnRollouts
	// rollouts' ConfigMaps and churnRules rules' sources, creates a namespace
	// for the following rule and deletes the one before.
	churnRounds   = 6
	churnEvery    = 10 * time.Second
	churnRollouts = 5
	churnRules    = 5
	// churnLabel marks the namespaces the following rule copies into.
	churnLabel = "clusterops.io/churn"
)

// A churnSample is what the provider held and sent by the end of a round.
type churnSample struct {
	goroutines, fds, watches, requests, failures float64
}

// TestFleetUnderChurn converges 300 managed resources of three kinds and a
// CopyRule that follows namespaces by label, then for six rounds changes ten
// of the fleet's sources and creates a namespace for the following rule while
// deleting the one before. Every change is acted on within atOnce: each
// changed rollout rolls its Deployment once more and never twice, each changed
// rule's copies hold the new data, the new namespace gets its copy. Across the
// rounds the provider holds what it held after the first: the same watches,
// no more goroutines or open files than a little slack allows, no reconcile
// ended in an error, and a round's changes cost about what the first round's
// did. make soak runs the long version (docs/faults.md).
func TestFleetUnderChurn(t *testing.T) {
	c := startCluster(t, false)
	ctx := context.Background()
	f := newWaveFleet(churnSize)
	f.create(t, c)
	followSrc := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: churnSize.ns(0), Name: "follow-src"}, Data: map[string]string{"v": "1"}}
	follow := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: churnSize.ns(0), Name: "follow"},
		Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
			Kind: copyv1alpha1.KindConfigMap, Names: []string{followSrc.Name},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{churnLabel: "true"}},
		}}}
	createAll(t, c, []client.Object{followSrc, follow})
	p := c.runProvider(t, "churn", "--poll=1h")
	f.record(c.waveConverge(t, f))
	// The rounds start on an idle provider: what a round sends is its
	// changes', not the tail of the fleet's convergence.
	p.idleAfter(t, managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind), len(f.rollouts))
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}

	generation := map[string]int64{}
	for _, r := range f.rollouts {
		generation[r.web.Name] = r.generation
	}
	var samples []churnSample
	prevNS := ""
	for round := range churnRounds {
		began := time.Now()
		v := fmt.Sprint(round + 2)
		patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"`+v+`"}}`))
		var waits []func(context.Context) (bool, error)
		for i := range churnRollouts {
			r := f.rollouts[(round*churnRollouts+i)%len(f.rollouts)]
			if err := c.Client.Patch(ctx, r.conf, patch); err != nil {
				t.Fatal(err)
			}
			generation[r.web.Name]++
			waits = append(waits, c.rolledTo(r.web, generation[r.web.Name]))
		}
		for i := range churnRules {
			r := f.rules[(round*churnRules+i)%len(f.rules)]
			if err := c.Client.Patch(ctx, r.src, patch); err != nil {
				t.Fatal(err)
			}
			for ns := range r.targets {
				waits = append(waits, c.holds(ns, r.src.Name, v))
			}
		}
		ns := fmt.Sprintf("team-churn-%d", round)
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{churnLabel: "true"}}}); err != nil {
			t.Fatal(err)
		}
		waits = append(waits, c.holds(ns, followSrc.Name, "1"))
		if prevNS != "" {
			c.deleteNamespace(t, cs, prevNS)
		}
		prevNS = ns
		for i, w := range waits {
			eventually(t, atOnce, fmt.Sprintf("round %d: change %d of %d acted on", round, i+1, len(waits)), w)
		}
		s := p.churnSample(t)
		samples = append(samples, s)
		t.Logf("round %d: %d changes acted on in %s; %.0f goroutines, %.0f open files, %.0f watches, %.0f requests so far",
			round, len(waits), time.Since(began).Round(time.Millisecond), s.goroutines, s.fds, s.watches, s.requests)
		time.Sleep(time.Until(began.Add(churnEvery)))
	}

	// No rollout rolled twice: every Deployment is at the generation its
	// changes account for.
	ds := &appsv1.DeploymentList{}
	if err := c.Client.List(ctx, ds); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Items {
		if want, ok := generation[d.Name]; ok && strings.HasPrefix(d.Namespace, "team-wave-") && d.Generation != want {
			t.Errorf("Deployment %s/%s at generation %d, want %d: rolled once per change of its ConfigMap", d.Namespace, d.Name, d.Generation, want)
		}
	}
	checkChurn(t, samples)
}

// checkChurn compares every round after the first with the first: a round
// holds the same watches, at most a little more of what grows with traffic
// (goroutines of connections, open files), fails no reconcile, and sends
// about what the first round sent.
func checkChurn(t *testing.T, samples []churnSample) {
	t.Helper()
	const goroutineSlack, fdSlack = 20, 4
	first := samples[0]
	var firstCost float64
	for i, s := range samples {
		if s.failures > 0 {
			t.Errorf("round %d: %.0f reconciles ended in an error", i, s.failures)
		}
		if i == 0 {
			continue
		}
		cost := s.requests - samples[i-1].requests
		if i == 1 {
			firstCost = cost
		}
		switch {
		case s.watches != first.watches:
			t.Errorf("round %d: %.0f watches, %.0f after the first: namespaces that come and go must not leave watches", i, s.watches, first.watches)
		case s.goroutines > first.goroutines+goroutineSlack:
			t.Errorf("round %d: %.0f goroutines, %.0f after the first", i, s.goroutines, first.goroutines)
		case s.fds > first.fds+fdSlack:
			t.Errorf("round %d: %.0f open files, %.0f after the first", i, s.fds, first.fds)
		case i > 1 && cost > 2*firstCost:
			t.Errorf("round %d sent %.0f requests, the second %.0f: a round's changes cost about the same", i, cost, firstCost)
		}
	}
}

// rolledTo is whether Deployment d is at generation want.
func (c *cluster) rolledTo(d *appsv1.Deployment, want int64) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		got := &appsv1.Deployment{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			return false, err
		}
		if got.Generation > want {
			return false, errors.Errorf("Deployment %s rolled twice: generation %d, want %d", d.Name, got.Generation, want)
		}
		return got.Generation == want, nil
	}
}

// holds is whether ConfigMap ns/name holds v.
func (c *cluster) holds(ns, name, v string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cm.Data["v"] == v, nil
	}
}

// deleteNamespace deletes ns as the namespace controller would, which
// envtest does not run: its ConfigMaps go, then the namespace is finalized.
func (c *cluster) deleteNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Finalizers = nil
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// churnSample reads what the provider holds and has sent.
func (p *provider) churnSample(t *testing.T) churnSample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s churnSample
	err := p.scrape(ctx, func(l string) (bool, error) {
		var into *float64
		switch {
		case strings.HasPrefix(l, "go_goroutines "):
			into = &s.goroutines
		case strings.HasPrefix(l, "process_open_fds "):
			into = &s.fds
		case strings.HasPrefix(l, "clusterops_api_watches{"):
			into = &s.watches
		case strings.HasPrefix(l, "clusterops_api_requests_total{"):
			into = &s.requests
		case strings.HasPrefix(l, "controller_runtime_reconcile_errors_total{"):
			into = &s.failures
		default:
			return true, nil
		}
		v, err := sampleValue(l)
		*into += v
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
