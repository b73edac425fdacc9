package shard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
)

// lines is a logging.Logger that keeps the messages it is given, by level.
type lines struct {
	mu    *sync.Mutex
	info  *[]string
	debug *[]string
}

func newLines() lines { return lines{mu: &sync.Mutex{}, info: &[]string{}, debug: &[]string{}} }

func (l lines) Info(msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.info = append(*l.info, msg+kvString(kv))
}

func (l lines) Debug(msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.debug = append(*l.debug, msg+kvString(kv))
}

func (l lines) WithValues(...any) logging.Logger { return l }

// kvString is the shard and lease keys of a line, the ones a reader needs
// to tell which request failed.
func kvString(kv []any) string {
	out := ""
	for i := 0; i+1 < len(kv); i += 2 {
		if k := kv[i]; k == "verb" || k == "lease" || k == "shard" {
			out += fmt.Sprintf(" %s=%v", k, kv[i+1])
		}
	}
	return out
}

// events is a record.EventRecorder that keeps what it is given.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Event(obj kruntime.Object, kind, reason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ref := obj.(*corev1.ObjectReference)
	e.got = append(e.got, fmt.Sprintf("%s %s %s %s/%s: %s", kind, reason, ref.Kind, ref.Namespace, ref.Name, msg))
}

func (e *events) Eventf(obj kruntime.Object, kind, reason, f string, args ...any) {
	e.Event(obj, kind, reason, fmt.Sprintf(f, args...))
}

func (e *events) AnnotatedEventf(obj kruntime.Object, _ map[string]string, kind, reason, f string, args ...any) {
	e.Eventf(obj, kind, reason, f, args...)
}

var leasesGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func forbidden(lease string) error {
	return kerrors.NewForbidden(leasesGR, lease, errors.New("RBAC says no"))
}

func TestReporterSaysAForbiddenListOnce(t *testing.T) {
	o := Options{Namespace: "ns", Name: "p", Identity: "a"}
	type call struct {
		verb, lease string
		err         error
		stopping    bool // the replica stops: its context is cancelled
	}
	timeout := kerrors.NewServerTimeout(leasesGR, "get", 1)
	listForbidden := `leases.coordination.k8s.io is forbidden: RBAC says no`
	cases := map[string]struct {
		reason string
		calls  []call
		info   []string
		debug  int
		// nEvents are the events recorded, one a failure; events, when
		// set, are what they say.
		nEvents int
		events  []string
	}{
		"ForbiddenListOnceInTheLog": {
			reason: "A list that RBAC forbids is said at info level once, with the verb to grant, and its repeats at debug; each is an event, which the correlator coalesces.",
			calls:  []call{{verb: "list", err: forbidden("")}, {verb: "list", err: forbidden("")}, {verb: "list", err: forbidden("")}},
			info: []string{
				"Forbidden to list the Leases of p's replicas and shards in ns: the provider's RBAC likely lacks it; until it is granted, the replica may not act on its shards verb=list",
			},
			debug:   2,
			nEvents: 3,
			events: []string{
				`Warning LeaseForbidden Lease ns/p-replica-a: Replica forbidden to list the Leases of p's replicas and shards in ns: grant "list" on leases.coordination.k8s.io (cluster/rbac/provider-rbac.yaml); until then it may not act on its shards: ` + listForbidden,
				`Warning LeaseForbidden Lease ns/p-replica-a: Replica forbidden to list the Leases of p's replicas and shards in ns: grant "list" on leases.coordination.k8s.io (cluster/rbac/provider-rbac.yaml); until then it may not act on its shards: ` + listForbidden,
				`Warning LeaseForbidden Lease ns/p-replica-a: Replica forbidden to list the Leases of p's replicas and shards in ns: grant "list" on leases.coordination.k8s.io (cluster/rbac/provider-rbac.yaml); until then it may not act on its shards: ` + listForbidden,
			},
		},
		"GrantedAgain": {
			reason: "A request that succeeds after it failed is said at info level.",
			calls:  []call{{verb: "delete", lease: "p-replica-a", err: forbidden("p-replica-a")}, {verb: "delete", lease: "p-replica-a"}},
			info: []string{
				"Forbidden to delete Lease ns/p-replica-a: the provider's RBAC likely lacks it; until it is granted, the replica may not act on its shards verb=delete lease=p-replica-a",
				"A request on a Lease succeeds again verb=delete lease=p-replica-a",
			},
			nEvents: 1,
			events: []string{
				`Warning LeaseForbidden Lease ns/p-replica-a: Replica forbidden to delete Lease ns/p-replica-a: grant "delete" on leases.coordination.k8s.io (cluster/rbac/provider-rbac.yaml); until then it may not act on its shards: leases.coordination.k8s.io "p-replica-a" is forbidden: RBAC says no`,
			},
		},
		"ShardLease": {
			reason: "A failure on a shard's Lease names the shard, and is an event on that Lease.",
			calls:  []call{{verb: "get", lease: "p-shard-3", err: timeout}},
			info: []string{
				"Cannot get shard 3's Lease ns/p-shard-3; until it can, the replica may not act on its shards verb=get lease=p-shard-3 shard=3",
			},
			nEvents: 1,
			events: []string{
				"Warning LeaseFailed Lease ns/p-shard-3: Replica cannot get shard 3's Lease ns/p-shard-3; until it can, it may not act on its shards: " + timeout.Error(),
			},
		},
		"EachProblemOnce": {
			reason: "Each distinct problem, by request, Lease and kind of error, is said at info level.",
			calls: []call{
				{verb: "update", lease: "p-shard-0", err: timeout},
				{verb: "update", lease: "p-shard-1", err: timeout},
				{verb: "update", lease: "p-shard-0", err: forbidden("p-shard-0")},
				{verb: "update", lease: "p-shard-0", err: forbidden("p-shard-0")},
			},
			info: []string{
				"Cannot update shard 0's Lease ns/p-shard-0; until it can, the replica may not act on its shards verb=update lease=p-shard-0 shard=0",
				"Cannot update shard 1's Lease ns/p-shard-1; until it can, the replica may not act on its shards verb=update lease=p-shard-1 shard=1",
				"Forbidden to update shard 0's Lease ns/p-shard-0: the provider's RBAC likely lacks it; until it is granted, the replica may not act on its shards verb=update lease=p-shard-0 shard=0",
			},
			debug:   1,
			nEvents: 4,
		},
		"PartOfSharing": {
			reason: "A Lease not there yet, one another replica created first, a conflicting write, and requests cut short as the replica stops are no problem.",
			calls: []call{
				{verb: "get", lease: "p-shard-0", err: kerrors.NewNotFound(leasesGR, "p-shard-0")},
				{verb: "create", lease: "p-shard-0", err: kerrors.NewAlreadyExists(leasesGR, "p-shard-0")},
				{verb: "update", lease: "p-shard-0", err: kerrors.NewConflict(leasesGR, "p-shard-0", errors.New("changed"))},
				{verb: "delete", lease: "p-replica-a", err: kerrors.NewNotFound(leasesGR, "p-replica-a")},
				{verb: "list", err: context.Canceled, stopping: true},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			log, rec := newLines(), &events{}
			o := o
			o.Logger = log
			r := newReporter(o, rec)
			for _, c := range tc.calls {
				ctx, cancel := context.WithCancel(context.Background())
				if c.stopping {
					cancel()
				}
				r.done(ctx, c.verb, c.lease, c.err)
				cancel()
			}
			if diff := cmp.Diff(tc.info, *log.info, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\ninfo lines: -want, +got:\n%s", tc.reason, diff)
			}
			if got := len(*log.debug); got != tc.debug {
				t.Errorf("%s\n%d debug lines, want %d: %v", tc.reason, got, tc.debug, *log.debug)
			}
			if got := len(rec.got); got != tc.nEvents {
				t.Errorf("%s\n%d events, want %d: %v", tc.reason, got, tc.nEvents, rec.got)
			}
			if tc.events != nil {
				if diff := cmp.Diff(tc.events, rec.got); diff != "" {
					t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}

// TestReportingLeasesNamesVerbs: every request on the Leases, the
// replica's own and client-go's leader election's (a LeaseLock on the
// same client), is reported with its verb and Lease.
func TestReportingLeasesNamesVerbs(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, kruntime.Object, error) {
		return true, nil, kerrors.NewForbidden(leasesGR, "", errors.Errorf("cannot %s", a.GetVerb()))
	})
	log := newLines()
	o := Options{Namespace: "ns", Name: "p", Identity: "a", Logger: log}
	l := reportingLeases{LeaseInterface: cs.CoordinationV1().Leases(o.Namespace), report: newReporter(o, nil)}
	ctx := context.Background()
	m := &members{leases: l, name: o.Name, identity: o.Identity, duration: time.Minute, now: time.Now}
	_ = m.renew(ctx)
	_, _ = m.read(ctx)
	_ = m.leave(ctx)
	_ = m.takeOver(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "p-shard-1"}})
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: "p-shard-2"}, Client: l}
	_, _, _ = lock.Get(ctx)
	_ = lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"})

	want := []string{
		"get lease=p-replica-a",
		"list",
		"delete lease=p-replica-a",
		"update lease=p-shard-1 shard=1",
		"get lease=p-shard-2 shard=2",
		"create lease=p-shard-2 shard=2",
	}
	var got []string
	for _, line := range *log.info {
		_, kv, _ := strings.Cut(line, " verb=")
		got = append(got, kv)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests reported: -want, +got:\n%s", diff)
	}
}

// TestLeaseEventsCoalesce: of the events of one problem that goes on, the
// replica's recorder writes the first to the API server, and none of its
// repeats within a remind period; a distinct problem is written at once.
// The broadcaster handles events in order, so once the second problem's is
// written, every repeat of the first was handled.
func TestLeaseEventsCoalesce(t *testing.T) {
	cs := fake.NewClientset()
	o := Options{Namespace: "ns", Name: "p", Identity: "a", Logger: newLines()}
	rec, stop := newRecorder(cs, o)
	defer stop()
	r := newReporter(o, rec)
	ctx := context.Background()
	for range 20 {
		r.done(ctx, "list", "", forbidden(""))
	}
	r.done(ctx, "update", "p-shard-0", forbidden("p-shard-0"))

	writes := func() []string {
		var out []string
		for _, a := range cs.Actions() {
			if a.GetResource().Resource == "events" {
				out = append(out, a.GetVerb())
			}
		}
		return out
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(writes()) >= 2, nil
	})
	if err != nil {
		t.Fatalf("the two problems' events were not written: %v", err)
	}
	if diff := cmp.Diff([]string{"create", "create"}, writes()); diff != "" {
		t.Errorf("event writes: -want, +got:\n%s", diff)
	}
	l, err := cs.CoreV1().Events(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range l.Items {
		got[e.InvolvedObject.Name] = e.Type + " " + e.Reason
	}
	want := map[string]string{"p-replica-a": "Warning LeaseForbidden", "p-shard-0": "Warning LeaseForbidden"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events by Lease: -want, +got:\n%s", diff)
	}
}

// TestLeaseEventsRemind: a problem that goes on is written again, as a
// raised count, once a remind period passed, so that its event outlives the
// API server's event TTL.
func TestLeaseEventsRemind(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	opts := EventCorrelation()
	opts.Clock = clock
	c := record.NewEventCorrelatorWithOptions(opts)
	event := func() *corev1.Event {
		now := metav1.NewTime(clock.Now())
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "p-replica-a.1", Namespace: "ns"},
			InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: "ns", Name: "p-replica-a"},
			Source:         corev1.EventSource{Component: "p", Host: "a"},
			Type:           corev1.EventTypeWarning, Reason: ReasonLeaseForbidden, Message: "forbidden to list",
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
	}
	var got []string
	step := func(d time.Duration) {
		clock.Step(d)
		res, err := c.EventCorrelate(event())
		switch {
		case err != nil:
			t.Fatal(err)
		case res.Skip:
			got = append(got, "skip")
		case res.Patch != nil:
			got = append(got, fmt.Sprintf("patch count=%d", res.Event.Count))
		default:
			got = append(got, "create")
		}
	}
	step(0)
	step(time.Second)
	step(remind / 2)
	step(remind / 2)
	want := []string{"create", "skip", "skip", "patch count=4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("writes of a problem that goes on: -want, +got:\n%s", diff)
	}
}
