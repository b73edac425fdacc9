package explore

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// Compaction is how often the explorer's API server compacts etcd: a restart
// with the replicas cut off (OpRestartAPIServer, T 1) waits until etcd has
// compacted past every revision they saw, a few of these.
const Compaction = 2 * time.Second

// faultTimeout bounds how long the API server, a CRD or a compaction may take
// to come back or happen.
const faultTimeout = 60 * time.Second

// throttled names the FlowSchema and the priority level of OpThrottle.
const throttled = "explore-throttle"

// applyFault runs the operations on the infrastructure: the network between
// the replicas and the API server, the API server itself, its flow control,
// RBAC and the kinds' CRDs.
func (s *State) applyFault(ctx context.Context, op Op) (err error, ok bool) { //nolint:revive // ok says whether op is one of these.
	d := time.Duration(op.Millis) * time.Millisecond
	switch op.Type {
	case OpPartition:
		return s.last(ctx, op.Type, d, func(context.Context) error { s.Fleet.cut.sever(); return nil },
			func(context.Context) error { s.Fleet.cut.heal(); return nil }), true
	case OpRevoke:
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: testenv.WorkloadsBinding}}
		return s.last(ctx, op.Type, d, func(ctx context.Context) error { return client.IgnoreNotFound(s.World.c.Delete(ctx, b)) },
			func(ctx context.Context) error {
				return testenv.ApplyShippedRBAC(ctx, s.World.c, testenv.WorkloadsBinding)
			}), true
	case OpThrottle:
		pl, fs := throttling(op.T == 1)
		return s.last(ctx, op.Type, d, func(ctx context.Context) error {
			// Made afresh: a leftover of another limit would not throttle as asked.
			if err := deleteAll(ctx, s.World.c, fs, pl); err != nil {
				return errors.Wrap(err, "cannot clear a throttling left behind")
			}
			return errors.Wrap(createAll(ctx, s.World.c, pl, fs), "cannot throttle the provider")
		}, func(ctx context.Context) error {
			return errors.Wrap(deleteAll(ctx, s.World.c, fs, pl), "cannot end the provider's throttling")
		}), true
	case OpRestartAPIServer:
		return s.restartAPIServer(ctx, op.T == 1), true
	case OpRemoveCRD:
		return s.removeCRD(ctx, op.Kind, d), true
	}
	return nil, false
}

// last starts fault typ, one that lasts: start runs now and end, on its own,
// after d, while the next steps land; what changes during a fault is what
// the provider must catch up on after it. A fault of the same type still on
// is waited for first. end is tried again until it succeeds (the API server
// may be restarting then) or faultTimeout passes; a start that fails is
// ended at once, as it may have done part of its work.
func (s *State) last(ctx context.Context, typ string, d time.Duration, start, end func(context.Context) error) error {
	if err := s.endFault(typ); err != nil {
		return err
	}
	if err := start(ctx); err != nil {
		if uerr := retryEnd(end); uerr != nil {
			return errors.Wrapf(err, "%v, and ending it", uerr)
		}
		return err
	}
	done := make(chan error, 1)
	s.lasting[typ] = done
	go func() {
		time.Sleep(d)
		err := retryEnd(end)
		done <- errors.Wrapf(err, "the %s did not end", typ)
	}()
	return nil
}

// retryEnd runs end until it succeeds or faultTimeout passes.
func retryEnd(end func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, faultTimeout, true, func(ctx context.Context) (bool, error) {
		last = end(ctx)
		return last == nil, nil
	})
	if err == nil {
		return nil
	}
	if last == nil {
		last = err
	}
	return errors.Wrapf(last, "not within %s", faultTimeout)
}

// restoreInfrastructure gives back whatever a fault may have taken away,
// however the sequence ended: the network healed, the throttling deleted,
// the provider's grant applied and every CRD a removeCRD may remove
// installed, so that the next sequence finds a whole API server.
func (s *State) restoreInfrastructure() error {
	s.Fleet.cut.reset()
	pl, fs := throttling(false)
	return retryEnd(func(ctx context.Context) error {
		if err := deleteAll(ctx, s.World.c, fs, pl); err != nil {
			return err
		}
		if err := testenv.ApplyShippedRBAC(ctx, s.World.c, testenv.WorkloadsBinding); err != nil {
			return err
		}
		for _, kind := range []string{KindAppBundle, KindImmortal, KindChaosAgent} {
			if err := installCRD(ctx, s.World.c, kind); err != nil {
				return err
			}
		}
		return nil
	})
}

// endFault waits until fault typ, when on, has ended.
func (s *State) endFault(typ string) error {
	done, ok := s.lasting[typ]
	if !ok {
		return nil
	}
	delete(s.lasting, typ)
	return <-done
}

// endFaults waits until every fault on has ended: a checkpoint, teardown
// and an abandoned world need the infrastructure whole.
func (s *State) endFaults() error {
	var first error
	for typ := range s.lasting {
		if err := s.endFault(typ); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// createAll creates objs in order.
func createAll(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// deleteAll deletes objs in order, gone already or not.
func deleteAll(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, o := range objs {
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// restartAPIServer restarts the API server under the replicas. Cut off, they
// stay off until etcd has compacted past the revision they saw last: their
// watches cannot resume where they were, and they relist.
func (s *State) restartAPIServer(ctx context.Context, cutOff bool) error {
	if !cutOff {
		return s.api.RestartAPIServer()
	}
	s.Fleet.cut.sever()
	defer s.Fleet.cut.heal()
	l := &corev1.ConfigMapList{}
	if err := s.World.c.List(ctx, l, client.InNamespace(s.World.Source()), client.Limit(1)); err != nil {
		return errors.Wrap(err, "cannot read the revision the replicas saw")
	}
	seen := l.ResourceVersion
	// One write past it: the restarted API server's watch cache starts
	// after it, so a list at exactly seen goes to etcd, which tells when it
	// has compacted past it.
	mark := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "explore-mark-"}}
	if err := s.World.c.Create(ctx, mark); err != nil {
		return errors.Wrap(err, "cannot write past the revision the replicas saw")
	}
	defer s.World.c.Delete(context.WithoutCancel(ctx), mark) //nolint:errcheck // Best effort: it marks a revision and nothing reads it.
	if err := s.api.RestartAPIServer(); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, faultTimeout, true, func(ctx context.Context) (bool, error) {
		err := s.World.c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(metav1.NamespaceDefault),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: seen, ResourceVersionMatch: metav1.ResourceVersionMatchExact}})
		return kerrors.IsResourceExpired(err) || kerrors.IsGone(err), nil
	})
	return errors.Wrapf(err, "etcd did not compact past revision %s within %s", seen, faultTimeout)
}

// throttling is a priority level of one nominal share (a few seats) and a
// FlowSchema that puts the provider's ServiceAccount in it: what does not
// fit queues, or with reject is refused with 429.
func throttling(reject bool) (*flowcontrolv1.PriorityLevelConfiguration, *flowcontrolv1.FlowSchema) {
	limit := flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
		Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: 200}}
	if reject {
		limit = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}
	}
	pl := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: throttled},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To[int32](1), LendablePercent: ptr.To[int32](0),
				// Nor borrows: an idle API server would lend it every seat.
				BorrowingLimitPercent: ptr.To[int32](0), LimitResponse: limit}}}
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: throttled},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: throttled},
			// Before the suggested schemas a ServiceAccount falls in (9000).
			MatchingPrecedence: 500,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: testenv.ProviderSANamespace, Name: testenv.ProviderSAName}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					Namespaces: []string{"*"}, ClusterScope: true}},
			}},
		}}
	return pl, fs
}

// crdName is the CRD OpRemoveCRD removes for kind.
func crdName(kind string) string {
	switch kind {
	case KindAppBundle:
		return "appbundles.workload.clusterops.io"
	case KindImmortal:
		return "immortalcontainers.workload.clusterops.io"
	default:
		return "chaosagents.chaos.clusterops.io"
	}
}

// listOf is an empty list of kind's managed resources.
func listOf(kind string) client.ObjectList {
	switch kind {
	case KindAppBundle:
		return &workloadv1alpha1.AppBundleList{}
	case KindImmortal:
		return &workloadv1alpha1.ImmortalContainerList{}
	default:
		return &chaosv1alpha1.ChaosAgentList{}
	}
}

// removeCRD deletes the CRD of kind, waits until it is gone, keeps it away
// for d and installs it again, as an uninstall and reinstall of a provider
// package or a hand's slip does; it returns once the kind is served again.
func (s *State) removeCRD(ctx context.Context, kind string, d time.Duration) error {
	c := s.World.c
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName(kind)}}
	if err := c.Delete(ctx, crd); err != nil {
		return errors.Wrapf(err, "cannot delete the CRD of %s", kind)
	}
	gone := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, faultTimeout, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
		return kerrors.IsNotFound(err), nil
	})
	if gone == nil {
		gone = sleep(ctx, d)
	}
	// Installed again even when ctx ended: the rest of the run needs it.
	restore, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*faultTimeout)
	defer cancel()
	if err := installCRD(restore, c, kind); err != nil {
		return err
	}
	return errors.Wrapf(gone, "the CRD of %s was not gone within %s", kind, faultTimeout)
}

// installCRD installs the CRD of kind from package/crds once no CRD of that
// name is being deleted, unless one is there, and returns once the kind is
// served.
func installCRD(ctx context.Context, c client.Client, kind string) error {
	name := crdName(kind)
	plural, group, _ := strings.Cut(name, ".")
	file := filepath.Join(testenv.RepoRoot(), "package", "crds", group+"_"+plural+".yaml")
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, faultTimeout, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
		switch {
		case err == nil:
			return crd.DeletionTimestamp == nil, nil
		case !kerrors.IsNotFound(err):
			return false, nil
		}
		_, err = testenv.ApplyFile(ctx, c, file)
		return err == nil, nil
	})
	if err != nil {
		return errors.Wrapf(err, "the CRD of %s was not installed again within %s", kind, faultTimeout)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, faultTimeout, true, func(ctx context.Context) (bool, error) {
		return c.List(ctx, listOf(kind), client.Limit(1)) == nil, nil
	})
	return errors.Wrapf(err, "the CRD of %s was not served again within %s", kind, faultTimeout)
}

// A cut is the network between the replicas and the API server: while it
// is severed every request fails as a refused connection does, and the
// responses open when it went (watches) end. A partition and a restart
// with the replicas cut off may overlap: it heals once both have healed it.
type cut struct {
	mu      sync.Mutex
	severed int
	open    map[*cutBody]struct{}
}

func newCut() *cut { return &cut{open: map[*cutBody]struct{}{}} }

// sever takes the network away and ends every open response.
func (c *cut) sever() {
	c.mu.Lock()
	c.severed++
	open := c.open
	c.open = map[*cutBody]struct{}{}
	c.mu.Unlock()
	for b := range open {
		// Closed apart: a body's Close may wait for a Read in flight.
		go b.ReadCloser.Close()
	}
}

// reset heals the network however many severed it.
func (c *cut) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.severed = 0
}

// heal gives the network back.
func (c *cut) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.severed--
}

// track notes b as open, unless the network is severed.
func (c *cut) track(b *cutBody) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.severed > 0 {
		return false
	}
	c.open[b] = struct{}{}
	return true
}

func (c *cut) untrack(b *cutBody) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open, b)
}

func (c *cut) isSevered() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.severed > 0
}

// refused is the error a request meets while the network is severed.
func refused() error { return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED} }

// cutTransport sends a replica's requests through a cut.
type cutTransport struct {
	next http.RoundTripper
	cut  *cut
}

func (t cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.cut.isSevered() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, refused()
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	b := &cutBody{ReadCloser: resp.Body, cut: t.cut}
	if !t.cut.track(b) {
		// Sent, perhaps acted on, and cut before the answer was read.
		_ = resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	resp.Body = b
	return resp, nil
}

// A cutBody is a response body a cut ends when it severs.
type cutBody struct {
	io.ReadCloser
	cut *cut
}

func (b *cutBody) Close() error {
	b.cut.untrack(b)
	return b.ReadCloser.Close()
}
