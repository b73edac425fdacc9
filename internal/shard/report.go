package shard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/record"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
)

// Reasons of the Warning events a replica records when a request on its
// Leases fails.
const (
	// ReasonLeaseForbidden: the API server refused the request (403), which
	// the provider's RBAC not granting the verb on Leases causes.
	ReasonLeaseForbidden = "LeaseForbidden"
	// ReasonLeaseFailed: the request failed otherwise, such as an API
	// server that did not answer in time.
	ReasonLeaseFailed = "LeaseFailed"
)

// remind is how often a Lease problem that goes on is recorded again as an
// event (one write, its count raised): often enough that the event outlives
// the API server's event TTL (an hour by default) while the problem lasts.
const remind = 10 * time.Minute

// EventCorrelation is how a replica's event broadcaster coalesces its
// events: the first of each distinct problem (its Lease, reason and
// message) is written at once, the same again at most once per remind, as
// a raised count. TestLeaseEventsCoalesce holds it.
func EventCorrelation() record.CorrelatorOptions {
	return record.CorrelatorOptions{
		BurstSize: 1,
		QPS:       float32(1 / remind.Seconds()),
		SpamKeyFunc: func(e *corev1.Event) string {
			return strings.Join([]string{
				e.Source.Component, e.Source.Host,
				e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
				e.Type, e.Reason, e.Message,
			}, "\x00")
		},
	}
}

// A reporter tells of the requests on a replica's Leases that fail: without
// them the replica does not act (it cannot tell which shards are its own,
// nor hold them). Each failure goes to the event recorder, whose correlator
// (EventCorrelation) coalesces them; the log says a problem at info level
// when it starts or changes and when the request succeeds again, and its
// repeats at debug level. Failures that are part of the protocol (a Lease
// not there yet, taken by another, a conflict) and requests cancelled as
// the replica stops are not problems. TestReporterSaysAForbiddenListOnce holds these rules.
type reporter struct {
	log       logging.Logger
	recorder  record.EventRecorder
	namespace string
	name      string // the provider's, the prefix of its Leases
	own       string // this replica's membership Lease

	mu      sync.Mutex
	failing map[string]string // verb and Lease → reason of its last failure
}

func newReporter(o Options, recorder record.EventRecorder) *reporter {
	return &reporter{
		log: o.Logger, recorder: recorder, namespace: o.Namespace, name: o.Name,
		own: replicaLease(o.Name, o.Identity), failing: map[string]string{},
	}
}

// expected are the errors of a request on a Lease that are part of sharing
// the shards, by verb.
func expected(verb string, err error) bool {
	switch verb {
	case "get":
		return kerrors.IsNotFound(err)
	case "delete":
		// A Lease gone already, or changed since it was read (the
		// preconditions of a sweep of shards gone).
		return kerrors.IsNotFound(err) || kerrors.IsConflict(err)
	case "create":
		return kerrors.IsAlreadyExists(err)
	case "update":
		return kerrors.IsConflict(err)
	}
	return false
}

// done notes how a request (verb) on lease ended; lease is "" for a list of
// the provider's Leases.
func (r *reporter) done(ctx context.Context, verb, lease string, err error) {
	if err != nil && (expected(verb, err) || errors.Is(ctx.Err(), context.Canceled)) {
		err = nil
	}
	subject := lease
	if subject == "" {
		subject = r.own
	}
	op := verb + " " + lease
	reason := ReasonLeaseFailed
	if kerrors.IsForbidden(err) {
		reason = ReasonLeaseForbidden
	}
	kv := r.keys(verb, lease, err)

	r.mu.Lock()
	was, failed := r.failing[op]
	if err == nil {
		delete(r.failing, op)
	} else {
		r.failing[op] = reason
	}
	r.mu.Unlock()

	switch {
	case err == nil && failed:
		r.log.Info("A request on a Lease succeeds again", kv...)
	case err == nil:
	case failed && was == reason:
		r.log.Debug(r.summary(verb, lease, reason), kv...)
	default:
		r.log.Info(r.summary(verb, lease, reason), kv...)
	}
	if err != nil && r.recorder != nil {
		ref := &corev1.ObjectReference{
			APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease",
			Namespace: r.namespace, Name: subject,
		}
		r.recorder.Event(ref, corev1.EventTypeWarning, reason, r.message(verb, lease, reason, err))
	}
}

// keys are the log's key-value pairs of a request on lease.
func (r *reporter) keys(verb, lease string, err error) []any {
	kv := []any{"verb", verb, "namespace", r.namespace}
	if lease != "" {
		kv = append(kv, "lease", lease)
	}
	if i, ok := r.shardOf(lease); ok {
		kv = append(kv, "shard", i)
	}
	if err != nil {
		kv = append(kv, "error", err)
	}
	return kv
}

// shardOf is the shard whose Lease lease is.
func (r *reporter) shardOf(lease string) (string, bool) {
	return strings.CutPrefix(lease, r.name+"-shard-")
}

// what names the Leases a request was on.
func (r *reporter) what(lease string) string {
	if lease == "" {
		return fmt.Sprintf("the Leases of %s's replicas and shards in %s", r.name, r.namespace)
	}
	if i, ok := r.shardOf(lease); ok {
		return fmt.Sprintf("shard %s's Lease %s/%s", i, r.namespace, lease)
	}
	return fmt.Sprintf("Lease %s/%s", r.namespace, lease)
}

// summary is the log's message of a failed request.
func (r *reporter) summary(verb, lease, reason string) string {
	if reason == ReasonLeaseForbidden {
		return "Forbidden to " + verb + " " + r.what(lease) + ": the provider's RBAC likely lacks it; until it is granted, the replica may not act on its shards"
	}
	return "Cannot " + verb + " " + r.what(lease) + "; until it can, the replica may not act on its shards"
}

// message is the event's message of a failed request.
func (r *reporter) message(verb, lease, reason string, err error) string {
	if reason == ReasonLeaseForbidden {
		return fmt.Sprintf("Replica forbidden to %s %s: grant %q on leases.coordination.k8s.io (cluster/rbac/provider-rbac.yaml); until then it may not act on its shards: %v", verb, r.what(lease), verb, err)
	}
	return fmt.Sprintf("Replica cannot %s %s; until it can, it may not act on its shards: %v", verb, r.what(lease), err)
}

// reportingLeases is a replica's client of its Leases: each request it
// sends is noted by the reporter, and each write of a shard's Lease that
// succeeds by the fence. Every request on the provider's Leases, its own
// and client-go's leader election's, goes through it.
type reportingLeases struct {
	coordinationclient.LeaseInterface
	report *reporter
	fence  *Fence
}

// Leases is the client itself: a replica's Leases are all in one
// namespace, the one it was made for (client-go's LeaseLock asks for its
// LeaseMeta's, which is that one).
func (l reportingLeases) Leases(string) coordinationclient.LeaseInterface { return l }

func (l reportingLeases) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	out, err := l.LeaseInterface.Get(ctx, name, o)
	l.report.done(ctx, "get", name, err)
	return out, err
}

func (l reportingLeases) List(ctx context.Context, o metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out, err := l.LeaseInterface.List(ctx, o)
	l.report.done(ctx, "list", "", err)
	return out, err
}

func (l reportingLeases) Create(ctx context.Context, lease *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	start := l.fence.start()
	out, err := l.LeaseInterface.Create(ctx, lease, o)
	l.report.done(ctx, "create", lease.Name, err)
	if err == nil {
		l.fence.wrote(out, start)
	}
	return out, err
}

func (l reportingLeases) Update(ctx context.Context, lease *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	start := l.fence.start()
	out, err := l.LeaseInterface.Update(ctx, lease, o)
	l.report.done(ctx, "update", lease.Name, err)
	if err == nil {
		l.fence.wrote(out, start)
	}
	return out, err
}

func (l reportingLeases) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	err := l.LeaseInterface.Delete(ctx, name, o)
	l.report.done(ctx, "delete", name, err)
	return err
}
