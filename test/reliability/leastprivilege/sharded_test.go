package leastprivilege

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/provider"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// shardedArgs are the flags of a sharded replica whose Leases are in
// namespace: two shards, and leases short enough that a few retry periods
// pass within a test.
func shardedArgs(namespace string) []string {
	return []string{
		"--shards=2", "--namespace", namespace,
		"--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s", "--leader-election-retry-period=1s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
	}
}

// runReplica runs the provider binary bin as the ServiceAccount sa with
// args, its output in a file; it is stopped when the test ends.
func runReplica(t *testing.T, bin, sa string, args ...string) (*testenv.Process, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "replica.log")
	p, err := testenv.StartProcess(log, bin, args, "KUBECONFIG="+impersonating(t, dir, sa))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replica's log ends:\n%s", p.LogTail(40))
		}
	})
	return p, log
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leases are the Leases of the provider's replicas and shards in namespace.
func leases(ctx context.Context, namespace string) (replicas, shards []coordinationv1.Lease, err error) {
	l := &coordinationv1.LeaseList{}
	if err := env.Client.List(ctx, l, client.InNamespace(namespace)); err != nil {
		return nil, nil, err
	}
	for _, lease := range l.Items {
		switch {
		case strings.HasPrefix(lease.Name, provider.LeaderElectionID+"-replica-"):
			replicas = append(replicas, lease)
		case strings.HasPrefix(lease.Name, provider.LeaderElectionID+"-shard-"):
			shards = append(shards, lease)
		}
	}
	return replicas, shards, nil
}

// TestShardedReplica runs cmd/provider, built once, as sharded replicas
// under the shipped RBAC and under less.
func TestShardedReplica(t *testing.T) {
	bin, err := testenv.BuildProvider(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("UnderShippedRBAC", func(t *testing.T) { shardedUnderShippedRBAC(t, bin) })
	t.Run("ReportsForbiddenLeases", func(t *testing.T) { shardedReportsForbiddenLeases(t, bin) })
}

// shardedUnderShippedRBAC runs cmd/provider with --shards=2 as
// the ServiceAccount that cluster/rbac/provider-rbac.yaml binds: the replica
// takes part in sharing the fleet (its Lease, the list of the others'),
// holds both shards' Leases, labels a CopyRule with its shard and acts on it
// until it is Ready, is refused nothing, and on SIGTERM releases its shards
// and deletes its Lease. The Leases are in a namespace of their own, apart
// from TestBinaryUnderShippedRBAC's leader election.
func shardedUnderShippedRBAC(t *testing.T, bin string) {
	start := time.Now()
	leaseNS := namespace(t, "lp-shards")
	p, log := runReplica(t, bin, saName, append(shardedArgs(leaseNS), "--debug")...)

	var identity string
	testenv.Eventually(t, wait, "the replica to hold both shards' Leases", func(ctx context.Context) (bool, error) {
		if r := refused(readLog(t, log)); len(r) > 0 {
			return false, errors.Errorf("refused: %s", r[0])
		}
		replicas, shards, err := leases(ctx, leaseNS)
		if err != nil || len(replicas) != 1 {
			return false, err
		}
		identity = *replicas[0].Spec.HolderIdentity
		held := 0
		for _, l := range shards {
			if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity {
				held++
			}
		}
		return held == 2, nil
	})
	t.Logf("the replica held both shards after %s", time.Since(start).Round(time.Millisecond))

	src, dst := namespace(t, "team-lp-shard-src"), namespace(t, "team-lp-shard-dst")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "shared"}, Data: map[string]string{"k": "v"}})
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "sharded"}}
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"shared"}, Namespaces: []string{dst}}
	env.Create(t, r)
	// The provider in this process, which is not sharded, acts on the rule
	// too: the replica's own log says it found the copy up to date.
	upToDate := regexp.MustCompile(`External resource is up to date.*"request": \{"name":"` + r.Name + `","namespace":"` + src + `"\}`)
	until(t, r, "the replica to label the CopyRule and act on it until it is Ready", func(context.Context) (bool, error) {
		if r := refused(readLog(t, log)); len(r) > 0 {
			return false, errors.Errorf("refused: %s", r[0])
		}
		if _, ok := shard.Parse(r.GetLabels()[shard.Label], 2); !ok {
			return false, fmt.Errorf("shard label %q", r.GetLabels()[shard.Label])
		}
		return r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue && upToDate.MatchString(readLog(t, log)), nil
	})
	t.Logf("the replica acted on the CopyRule after %s", time.Since(start).Round(time.Millisecond))
	deleteAndWait(t, r)

	p.Stop()
	ctx := context.Background()
	replicas, shards, err := leases(ctx, leaseNS)
	if err != nil {
		t.Fatal(err)
	}
	if len(replicas) != 0 {
		t.Errorf("the replica's Lease is left after it stopped: %s", replicas[0].Name)
	}
	for _, l := range shards {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity {
			t.Errorf("the replica still holds %s after it stopped", l.Name)
		}
	}
	for _, line := range refused(readLog(t, log)) {
		t.Errorf("the replica was refused: %s", line)
	}
}

// noLeaseSA is a ServiceAccount bound to the shipped rules less a sharded
// replica's Lease verbs, as the file granted them before sharding.
const noLeaseSA = "provider-clusterops-nolease"

// bindWithout binds noLeaseSA to copies of the shipped ClusterRoles
// (testenv.ShippedRBACFiles) whose Lease rules lack verbs.
func bindWithout(t *testing.T, verbs ...string) {
	t.Helper()
	ctx := context.Background()
	for _, f := range testenv.ShippedRBACFiles() {
		for _, r := range clusterRoles(t, f) {
			role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: noLeaseSA + ":" + r.Name}, Rules: r.Rules}
			for i, rule := range role.Rules {
				if slices.Contains(rule.Resources, "leases") {
					role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return slices.Contains(verbs, v) })
				}
			}
			b := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: noLeaseSA, Namespace: saNamespace}},
			}
			env.Create(t, role, b)
			t.Cleanup(func() {
				_ = env.Client.Delete(ctx, b)
				_ = env.Client.Delete(ctx, role)
			})
		}
	}
}

// shardedReportsForbiddenLeases runs cmd/provider with
// --shards=2, without --debug, as a ServiceAccount whose rules are the
// shipped ones less list and delete on Leases (what the file granted before
// sharding): the replica renews its own Lease but cannot read the others',
// so it takes no shard. It says so at the default log level, once, naming
// the verb and RBAC, and as one Warning event LeaseForbidden on its Lease
// that names the verb to grant; the event is not written again while the
// list keeps failing every retry period (internal/shard's reporter).
func shardedReportsForbiddenLeases(t *testing.T, bin string) {
	for _, r := range clusterRoles(t, filepath.Join("cluster", "rbac", "provider-rbac.yaml")) {
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, "leases") && (!slices.Contains(rule.Verbs, "list") || !slices.Contains(rule.Verbs, "delete")) {
				t.Fatalf("cluster/rbac/provider-rbac.yaml grants %v on Leases: a sharded replica lists and deletes them", rule.Verbs)
			}
		}
	}
	bindWithout(t, "list", "delete")
	leaseNS := namespace(t, "lp-shards-nolease")
	_, log := runReplica(t, bin, noLeaseSA, shardedArgs(leaseNS)...)
	var ownLease *coordinationv1.Lease
	forbiddenList := func(ctx context.Context) ([]corev1.Event, error) {
		l := &corev1.EventList{}
		if err := env.Client.List(ctx, l, client.InNamespace(leaseNS)); err != nil {
			return nil, err
		}
		return slices.DeleteFunc(l.Items, func(e corev1.Event) bool {
			return e.Type != corev1.EventTypeWarning || e.Reason != shard.ReasonLeaseForbidden || !strings.Contains(e.Message, `grant "list" on leases.coordination.k8s.io`)
		}), nil
	}
	testenv.Eventually(t, wait, "a Warning event and a log line at info level that the replica may not list Leases", func(ctx context.Context) (bool, error) {
		replicas, _, err := leases(ctx, leaseNS)
		if err != nil || len(replicas) != 1 {
			return false, err
		}
		ownLease = &replicas[0]
		es, err := forbiddenList(ctx)
		return err == nil && len(es) > 0 && len(forbiddenListLines(t, readLog(t, log))) > 0, err
	})

	// Three more renewals of its Lease are at least two more lists refused.
	seen := map[string]bool{ownLease.ResourceVersion: true}
	testenv.Eventually(t, wait, "the replica to renew its Lease three more times", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ownLease), ownLease); err != nil {
			return false, err
		}
		seen[ownLease.ResourceVersion] = true
		return len(seen) > 3, nil
	})
	es, err := forbiddenList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Count != 1 || es[0].InvolvedObject.Kind != "Lease" || es[0].InvolvedObject.Name != ownLease.Name {
		t.Errorf("want one event, written once, on Lease %s; got %d: %+v", ownLease.Name, len(es), es)
	}
	if l := forbiddenListLines(t, readLog(t, log)); len(l) != 1 {
		t.Errorf("%d lines at info level say the list is forbidden, want one: %v", len(l), l)
	}
	_, shards, err := leases(context.Background(), leaseNS)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 0 {
		t.Errorf("the replica took shard Leases without knowing the others: %d", len(shards))
	}
	t.Logf("event: %s", es[0].Message)
}

// forbiddenListLines are the lines at info level of a replica's log (zap's
// JSON, without --debug) that say it may not list Leases, and RBAC is why.
func forbiddenListLines(t *testing.T, log string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Verb  string `json:"verb"`
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		if l.Level == "info" && l.Verb == "list" && strings.Contains(l.Msg, "RBAC") && strings.Contains(l.Error, "forbidden") {
			out = append(out, line)
		}
	}
	return out
}
