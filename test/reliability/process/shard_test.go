package process

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// shards is the --shards of the sharded replicas: a few per replica, so that
// shares are uneven only by one.
const shards = 8

// shardTakeover is the longest the live replicas take to hold a killed
// replica's shards: a lease duration to see it gone (its membership Lease
// unchanged that long, read every retry period), when its shard Leases,
// unrenewed as long, are taken at once; a retry to hold them and settle
// (2 s) before acting; and 6 s for a loaded machine.
var shardTakeover = leaseDuration + 4*jitteredRetry + 8*time.Second

// shardSize is the fleet the sharded replicas share: 240 managed resources
// over 24 namespaces, so that every shard has some.
var shardSize = waveSize{namespaces: 24, rollouts: 120, rules: 96, bundles: 24}

// shardedReplica runs one replica of a sharded provider, with the leases of
// the leader election tests and --debug, whose log says which resource each
// reconcile was of.
func (c *cluster) shardedReplica(t *testing.T, name string) *provider {
	t.Helper()
	args := append(replicaArgs(), "--shards="+strconv.Itoa(shards), "--debug")
	return c.runProvider(t, name, args...)
}

// held are the shards p holds the Leases of, by its own metrics.
func (p *provider) held(ctx context.Context) ([]int, error) {
	var out []int
	for i := range shards {
		v, ok, err := p.metric(ctx, fmt.Sprintf(`clusterops_shard_held{shard="%d"}`, i))
		if err != nil {
			return nil, err
		}
		if ok && v == 1 {
			out = append(out, i)
		}
	}
	return out, nil
}

// shares waits until the replicas ps hold every shard between them, each
// some, and returns who holds which.
func shares(t *testing.T, within time.Duration, ps ...*provider) map[int]*provider {
	t.Helper()
	var owner map[int]*provider
	eventually(t, within, fmt.Sprintf("%d replicas to share the %d shards", len(ps), shards), func(ctx context.Context) (bool, error) {
		owner = map[int]*provider{}
		for _, p := range ps {
			h, err := p.held(ctx)
			if err != nil || len(h) == 0 {
				return false, err
			}
			for _, i := range h {
				if o := owner[i]; o != nil {
					return false, fmt.Errorf("shard %d held by %s and %s", i, o.name, p.name)
				}
				owner[i] = p
			}
		}
		return len(owner) == shards, nil
	})
	return owner
}

// reconciled are the resources (namespace/name) the replica's log says it
// reconciled, from line skip on, and how many lines the log has.
func (c *cluster) reconciled(t *testing.T, p *provider, skip int) (map[string]bool, int) {
	t.Helper()
	f, err := os.Open(filepath.Join(c.logs, p.name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, n := map[string]bool{}, 0
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		n++
		if n <= skip {
			continue
		}
		if m := reconcilingRE.FindStringSubmatch(s.Text()); m != nil {
			out[m[2]+"/"+m[1]] = true
		}
		if shareRE.MatchString(s.Text()) {
			p.shares = append(p.shares, s.Text())
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out, n
}

// reconcilingRE matches crossplane-runtime's debug line at the start of a
// managed resource's reconcile.
var reconcilingRE = regexp.MustCompile(`Reconciling.*"request": \{"name":"([^"]+)","namespace":"([^"]+)"\}`)

// shareRE matches the lines where a replica says its share changed.
var shareRE = regexp.MustCompile(`shares changed|Acting on the replica|Lost a shard|stopped; starting`)

// TestReplicasShareTheFleet runs three replicas of a sharded provider against
// a real API server. They share the shards, every managed resource is
// labelled with its namespace's shard and reconciled by the one replica that
// holds it, a resource created later is picked up at once, and a label set by
// hand pins a resource to a shard. Then every ConfigMap the fleet references
// changes, and one replica is SIGKILLed while the change is in flight: the
// others take its shards once its Leases run out, every Deployment is rolled
// exactly once, every copy holds the new data, and a ChaosAgent on the killed
// replica's shard, whose next round is an hour away, runs no round when
// another replica takes it over.
func TestReplicasShareTheFleet(t *testing.T) {
	c := startCluster(t, false)
	a := c.shardedReplica(t, "a")
	shares(t, startup, a)
	b, d := c.shardedReplica(t, "b"), c.shardedReplica(t, "d")
	owner := shares(t, takeover+startup, a, b, d)
	ps := []*provider{a, b, d}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range ps {
				p.shares = nil
				c.reconciled(t, p, 0)
				t.Logf("replica %s's shares:\n%s", p.name, strings.Join(p.shares, "\n"))
			}
		}
	})
	skip := map[*provider]int{}
	for _, p := range ps {
		_, skip[p] = c.reconciled(t, p, 0)
	}
	for i, p := range owner {
		t.Logf("shard %d: replica %s", i, p.name)
	}

	f := newWaveFleet(shardSize)
	start := time.Now()
	f.create(t, c)
	f.record(c.waveConverge(t, f))
	t.Logf("%d managed resources created and converged in %s", len(f.rollouts)+len(f.rules)+len(f.bundles), time.Since(start).Round(time.Millisecond))

	// Each resource carries its namespace's shard, and only the replica
	// that holds it reconciled it.
	byReplica := map[*provider]map[string]bool{}
	for _, p := range ps {
		byReplica[p], _ = c.reconciled(t, p, skip[p])
	}
	for _, mr := range f.managed() {
		key := client.ObjectKeyFromObject(mr)
		if err := c.Client.Get(context.Background(), key, mr); err != nil {
			t.Fatal(err)
		}
		want := shard.Name(shard.Of(mr.GetNamespace(), shards))
		if got := mr.GetLabels()[shard.Label]; got != want {
			t.Errorf("%s is labelled shard %q, want %q", key, got, want)
			continue
		}
		var by []string
		for _, p := range ps {
			if byReplica[p][key.String()] {
				by = append(by, p.name)
			}
		}
		i := shard.Of(mr.GetNamespace(), shards)
		if !slices.Equal(by, []string{owner[i].name}) {
			t.Errorf("%s (shard %d, held by %s) reconciled by %v", key, i, owner[i].name, by)
		}
	}

	// What the AppBundles made carries their shard, so that only its holder
	// watches it; pinned to another shard, a bundle's objects are labelled
	// again in place by the new holder, neither made again nor rolled.
	for _, b := range f.bundles {
		want := shard.Name(shard.Of(b.ab.Namespace, shards))
		if b.deployment.Labels[shard.Label] != want || b.claim.Labels[shard.Label] != want {
			t.Errorf("AppBundle %s/%s: Deployment labelled shard %q, claim %q, want %q", b.ab.Namespace, b.ab.Name, b.deployment.Labels[shard.Label], b.claim.Labels[shard.Label], want)
		}
	}
	moved := f.bundles[0]
	movedTo := shard.Name((shard.Of(moved.ab.Namespace, shards) + 1) % shards)
	pin := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+shard.Label+`":"`+movedTo+`"}}}`))
	if err := c.Client.Patch(context.Background(), moved.ab, pin); err != nil {
		t.Fatal(err)
	}
	dep, claim := &appsv1.Deployment{}, &corev1.PersistentVolumeClaim{}
	eventually(t, react, "the moved AppBundle's objects to carry its new shard", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(moved.ab), dep); err != nil {
			return false, err
		}
		if err := c.Client.Get(ctx, claimKey(moved.ab), claim); err != nil {
			return false, err
		}
		return dep.Labels[shard.Label] == movedTo && claim.Labels[shard.Label] == movedTo, nil
	})
	if dep.UID != moved.deployment.UID || dep.Generation != moved.deployment.Generation || claim.UID != moved.claim.UID {
		t.Errorf("the moved AppBundle's Deployment is at generation %d (was %d), made again: %t; claim made again: %t",
			dep.Generation, moved.deployment.Generation, dep.UID != moved.deployment.UID, claim.UID != moved.claim.UID)
	}

	// A resource created now is labelled and acted on at once; one pinned
	// by hand to a shard its namespace is not in is acted on by that
	// shard's holder.
	ns := shardSize.ns(0)
	other := (shard.Of(ns, shards) + 1) % shards
	for _, pin := range []string{"", shard.Name(other)} {
		rule := &copyv1alpha1.CopyRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late" + pin},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: copyv1alpha1.KindConfigMap, Names: []string{"copy-0"}, Namespaces: []string{shardSize.ns(5 + len(pin))},
			}},
		}
		if pin != "" {
			rule.Labels = map[string]string{shard.Label: pin}
		}
		created := time.Now()
		if err := c.Client.Create(context.Background(), rule); err != nil {
			t.Fatal(err)
		}
		copied := &corev1.ConfigMap{}
		eventually(t, react, "the late rule "+rule.Name+" to copy", func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, types.NamespacedName{Namespace: rule.Spec.ForProvider.Namespaces[0], Name: "copy-0"}, copied)
			return err == nil, client.IgnoreNotFound(err)
		})
		t.Logf("rule %s (shard label %q) copied %s after it was created", rule.Name, pin, time.Since(created).Round(time.Millisecond))
		// The change below must reach its copy too.
		f.rules = append(f.rules, &waveRule{src: f.rules[0].src, rule: rule, targets: map[string]bool{rule.Spec.ForProvider.Namespaces[0]: true}})
		holder := owner[shard.Of(ns, shards)]
		if pin != "" {
			holder = owner[other]
		}
		for _, p := range ps {
			got, _ := c.reconciled(t, p, skip[p])
			if got[ns+"/"+rule.Name] != (p == holder) {
				t.Errorf("rule %s reconciled by %s: %t, want only by %s", rule.Name, p.name, got[ns+"/"+rule.Name], holder.name)
			}
		}
	}

	// A label that names no shard: no replica acts, and the resource says why.
	lost := &copyv1alpha1.CopyRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unsharded", Labels: map[string]string{shard.Label: "99"}},
		Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
			Kind: copyv1alpha1.KindConfigMap, Names: []string{"copy-0"}, Namespaces: []string{shardSize.ns(9)},
		}},
	}
	if err := c.Client.Create(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	eventually(t, react, "a Warning event UnknownShard on the rule labelled 99", func(ctx context.Context) (bool, error) {
		evs := &corev1.EventList{}
		err := c.Client.List(ctx, evs, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": lost.Name})
		for _, e := range evs.Items {
			if e.Reason == shard.ReasonUnknownShard && e.Type == corev1.EventTypeWarning {
				return true, nil
			}
		}
		return false, err
	})
	for _, p := range ps {
		if got, _ := c.reconciled(t, p, skip[p]); got[ns+"/"+lost.Name] {
			t.Errorf("rule %s, labelled with no shard, reconciled by %s", lost.Name, p.name)
		}
	}
	if err := c.Client.Delete(context.Background(), lost); err != nil {
		t.Fatal(err)
	}

	// A ChaosAgent whose next round is an hour away, in a namespace of its
	// own on the shard of the replica that will be killed: the replica that
	// takes the shard over runs no round.
	agent, agentState := c.hourlyAgent(t, shard.Of(ns, shards))
	var before string
	eventually(t, react, "the agent's first round", func(ctx context.Context) (bool, error) {
		var err error
		before, err = agentState(ctx)
		return err == nil && agent.Status.AtProvider.RoundsRun == 1, err
	})

	// A fleet-wide change, and a replica killed while it is in flight.
	f.change(t, c)
	victim := owner[shard.Of(shardSize.ns(0), shards)]
	eventually(t, react, "the change to be under way", func(ctx context.Context) (bool, error) {
		done, err := c.waveDone(ctx, f)
		return done >= f.work()/10, err
	})
	done, _ := c.waveDone(context.Background(), f)
	victim.Kill()
	killed := time.Now()
	t.Logf("replica %s killed with %d of %d writes done", victim.name, done, f.work())
	var rest []*provider
	for _, p := range ps {
		if p != victim {
			rest = append(rest, p)
		}
	}
	shares(t, shardTakeover, rest...)
	t.Logf("replica %s's shards taken over %s after it was killed", victim.name, time.Since(killed).Round(time.Millisecond))
	eventually(t, settle, "every resource of the fleet as the change wants it", f.changed(t, c, f.bundlesAsWanted))
	t.Logf("the fleet settled %s after the kill", time.Since(killed).Round(time.Millisecond))

	// The agent's new holder has reconciled it, and it ran no round.
	eventually(t, react, "the agent's new holder to reconcile it", func(context.Context) (bool, error) {
		for _, p := range rest {
			if got, _ := c.reconciled(t, p, skip[p]); got[agent.Namespace+"/"+agent.Name] {
				return true, nil
			}
		}
		return false, nil
	})
	stays(t, 5*time.Second, "no chaos round on the takeover ("+before+")", func(ctx context.Context) (bool, error) {
		s, err := agentState(ctx)
		return s == before, err
	})
}

// hourlyAgent is hourlyAgentIn a namespace of its own on shard i.
func (c *cluster) hourlyAgent(t *testing.T, i int) (*chaosv1alpha1.ChaosAgent, func(context.Context) (string, error)) {
	t.Helper()
	for k := 0; ; k++ {
		if ns := fmt.Sprintf("team-chaos-%d", k); shard.Of(ns, shards) == i {
			return c.hourlyAgentIn(t, ns)
		}
	}
}

// hourlyAgentIn makes namespace ns with a Deployment and a ChaosAgent that
// doubles it once an hour, and returns the agent with what must not change
// before its next round: once it ran one, no takeover may run another.
func (c *cluster) hourlyAgentIn(t *testing.T, ns string) (*chaosv1alpha1.ChaosAgent, func(context.Context) (string, error)) {
	t.Helper()
	victim := deployment(ns, "victim", 1)
	agent := &chaosv1alpha1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hourly"},
		Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
			CancerMode: true, MaxReplicas: 64, Eagerness: 100, Interval: metav1.Duration{Duration: time.Hour}, Seed: ptr.To[int64](1605),
		}},
	}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, victim, agent} {
		if err := c.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	return agent, func(ctx context.Context) (string, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(agent), agent); err != nil {
			return "", err
		}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
			return "", err
		}
		o := agent.Status.AtProvider
		if o.LastRoundTime == nil {
			return "", errors.New("no round yet")
		}
		return fmt.Sprintf("rounds %d, last round %s, scaled %d, victim replicas %d", o.RoundsRun, o.LastRoundTime.UTC().Format(time.RFC3339Nano), o.DeploymentsScaled, *victim.Spec.Replicas), nil
	}
}

// managed are the fleet's managed resources.
func (f *waveFleet) managed() []client.Object {
	var out []client.Object
	for _, r := range f.rollouts {
		out = append(out, r.ro)
	}
	for _, r := range f.rules {
		out = append(out, r.rule)
	}
	for _, b := range f.bundles {
		out = append(out, b.ab)
	}
	return out
}
