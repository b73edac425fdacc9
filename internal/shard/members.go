package shard

import (
	"context"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// LabelReplicaOf marks the Leases of a provider's replicas, by the provider's
// name, so that each replica lists the others'.
const LabelReplicaOf = "clusterops.io/replica-of"

// members keeps this replica's membership Lease and tells which replicas are
// alive: those whose Lease changed within a lease duration, by this
// replica's clock (as client-go's leader election times a leader, so that
// clocks need not agree).
type members struct {
	leases   coordinationclient.LeaseInterface
	name     string // the provider's name, and its Leases' prefix
	identity string
	// shards is this replica's --shards, which its membership Lease
	// carries as LabelShards: the live replicas it shares with are those
	// of its own count (peers). Zero counts every replica.
	shards   int
	duration time.Duration
	now      func() time.Time

	seen map[string]sighting // Lease name → when its version last changed
}

type sighting struct {
	version string
	at      time.Time
	holder  string
	swept   time.Time // when this replica last tried to delete it
}

// Identity makes a replica's identity of its host's name and a random
// suffix: lowercase letters, digits and dashes, short enough that its
// Lease's name is a valid one.
func Identity(host, suffix string) string {
	clean := func(s string, n int) string {
		b := []byte(strings.ToLower(s))
		for i, c := range b {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
				b[i] = '-'
			}
		}
		return strings.Trim(string(b[:min(len(b), n)]), "-")
	}
	id := clean(host, 180) + "-" + clean(suffix, 8)
	return strings.Trim(id, "-")
}

// leaseName is the membership Lease of the replica.
func (m *members) leaseName() string { return replicaLease(m.name, m.identity) }

// replicaLease is the membership Lease of the replica identity of the
// provider name.
func replicaLease(name, identity string) string { return name + "-replica-" + identity }

// renew creates or renews this replica's Lease.
func (m *members) renew(ctx context.Context) error {
	now := metav1.NewMicroTime(m.now())
	l, err := m.leases.Get(ctx, m.leaseName(), metav1.GetOptions{})
	if kerrors.IsNotFound(err) {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.leaseName(), Labels: m.labels()},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(m.identity),
				LeaseDurationSeconds: ptr.To(int32(m.duration.Seconds())),
				AcquireTime:          &now,
				RenewTime:            &now,
			},
		}
		_, err = m.leases.Create(ctx, l, metav1.CreateOptions{})
		return errors.Wrap(err, "cannot create the replica's lease")
	}
	if err != nil {
		return errors.Wrap(err, "cannot get the replica's lease")
	}
	l.Spec.RenewTime = &now
	l.Labels = m.labels()
	_, err = m.leases.Update(ctx, l, metav1.UpdateOptions{})
	return errors.Wrap(err, "cannot renew the replica's lease")
}

// labels are those of this replica's membership Lease.
func (m *members) labels() map[string]string {
	ls := map[string]string{LabelReplicaOf: m.name}
	if m.shards > 0 {
		ls[LabelShards] = strconv.Itoa(m.shards)
	}
	return ls
}

// peer is whether the replica of a membership Lease labelled ls shares the
// shards with this one: it runs with the same --shards. While --shards
// changes, the replicas of each count share its shards among themselves, so
// that every shard of each count is wanted by one of its replicas: counted
// together, the replicas of one count would leave to the others shards
// those do not have. A replica older than LabelShards is no peer.
// TestReadPeersAndSweeps holds it.
func (m *members) peer(ls map[string]string) bool {
	return m.shards <= 0 || ls[LabelShards] == strconv.Itoa(m.shards)
}

// A view is what one list of the provider's Leases says: the replicas alive
// (this one always among them), and the shard Leases that nobody renewed for
// a lease duration, by shard, which a replica that wants them may take at
// once.
type view struct {
	live  []string
	stale map[int]*coordinationv1.Lease
}

// read lists the provider's Leases, the replicas' and the shards', and tells
// which have changed within a lease duration by this replica's clock: one
// list a retry period, whatever the number of replicas and shards. The
// Leases of shards beyond this replica's count that nobody renewed for a
// lease duration, left by replicas of a larger --shards, it deletes (sweep).
func (m *members) read(ctx context.Context) (view, error) {
	l, err := m.leases.List(ctx, metav1.ListOptions{LabelSelector: LabelReplicaOf + "=" + m.name})
	if err != nil {
		return view{}, errors.Wrap(err, "cannot list the replicas' leases")
	}
	now := m.now()
	seen := make(map[string]sighting, len(l.Items))
	v := view{live: []string{m.identity}, stale: map[int]*coordinationv1.Lease{}}
	for i := range l.Items {
		lease := &l.Items[i]
		s := sighting{version: lease.ResourceVersion, at: now, holder: ptr.Deref(lease.Spec.HolderIdentity, "")}
		if prev, ok := m.seen[lease.Name]; ok && prev.version == s.version {
			s.at, s.swept = prev.at, prev.swept
		}
		fresh := now.Sub(s.at) < m.duration
		if shard, ok := strings.CutPrefix(lease.Name, m.name+"-shard-"); ok {
			i, err := strconv.Atoi(shard)
			switch {
			case err != nil || fresh:
			case m.shards > 0 && i >= m.shards:
				s.swept = m.sweep(ctx, lease, s.swept)
			case s.holder != "" && s.holder != m.identity:
				v.stale[i] = lease
			}
			seen[lease.Name] = s
			continue
		}
		seen[lease.Name] = s
		if s.holder != "" && s.holder != m.identity && fresh && m.peer(lease.Labels) {
			v.live = append(v.live, s.holder)
		}
	}
	m.seen = seen
	return v, nil
}

// sweep deletes the Lease of a shard beyond this replica's count, which
// nobody renewed for a lease duration, unless it changed since it was read:
// a replica that renews it (one of a larger --shards) keeps it. It tries
// once a lease duration, and returns when it last tried.
func (m *members) sweep(ctx context.Context, l *coordinationv1.Lease, swept time.Time) time.Time {
	now := m.now()
	if !swept.IsZero() && now.Sub(swept) < m.duration {
		return swept
	}
	// The Leases' client reports a failure (reporter); the next sweep, a
	// lease duration later, tries again.
	_ = m.leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
		UID: ptr.To(l.UID), ResourceVersion: ptr.To(l.ResourceVersion),
	}})
	return now
}

// takeOver makes this replica the holder of a shard's Lease that nobody
// renewed for a lease duration, if it is still as read: client-go's leader
// election then renews it at once, rather than timing it out again from its
// own first look.
func (m *members) takeOver(ctx context.Context, stale *coordinationv1.Lease) error {
	l := stale.DeepCopy()
	now := metav1.NewMicroTime(m.now())
	l.Spec.HolderIdentity = ptr.To(m.identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(m.duration.Seconds()))
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	_, err := m.leases.Update(ctx, l, metav1.UpdateOptions{})
	return errors.Wrap(err, "cannot take over a shard's lease")
}

// release gives up a shard's Lease this replica holds, as client-go's leader
// election does when it is cancelled: another replica takes it at its next
// retry. The loop calls it only once it stopped acting on the shard.
func (m *members) release(ctx context.Context, name string) error {
	l, err := m.leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return errors.Wrap(client404(err), "cannot get a shard's lease to release it")
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != m.identity {
		return nil
	}
	now := metav1.NewMicroTime(m.now())
	l.Spec.HolderIdentity = nil
	l.Spec.LeaseDurationSeconds = ptr.To(int32(1))
	l.Spec.RenewTime, l.Spec.AcquireTime = &now, &now
	_, err = m.leases.Update(ctx, l, metav1.UpdateOptions{})
	return errors.Wrap(err, "cannot release a shard's lease")
}

// leave deletes this replica's Lease, so that the others take its share at
// once rather than after a lease duration.
func (m *members) leave(ctx context.Context) error {
	err := m.leases.Delete(ctx, m.leaseName(), metav1.DeleteOptions{})
	return errors.Wrap(client404(err), "cannot delete the replica's lease")
}

func client404(err error) error {
	if kerrors.IsNotFound(err) {
		return nil
	}
	return err
}
