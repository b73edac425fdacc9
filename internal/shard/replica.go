package shard

import (
	"context"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
)

// Options say how a replica takes part in sharing the fleet.
type Options struct {
	// Config is the API server of the Leases, in Namespace. Run bounds each
	// request by RenewDeadline, so that no request to a server that stopped
	// answering holds a replica's giving up its shards.
	Config    *rest.Config
	Namespace string

	// Name is the provider's, the prefix of its Leases: Name-replica-<identity>
	// says a replica is alive, Name-shard-<i> who acts on shard i.
	Name string

	// Identity is this replica's, unique among the live ones.
	Identity string

	// Shards is how many shards the fleet is cut into.
	Shards int

	// LeaseDuration, RenewDeadline and RetryPeriod time every Lease, as
	// client-go's leader election does: a dead replica's shards are taken
	// within about LeaseDuration, and a replica that cannot renew a shard's
	// Lease within RenewDeadline stops acting on it before another may start.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	Logger logging.Logger

	// Metrics, when set, say which shards the replica holds and acts on.
	Metrics *Metrics
}

// Work acts on the managed resources of the shards a replica holds.
type Work interface {
	// Run acts until ctx ends, on the shards of the latest Hold, and
	// returns only once it no longer acts on any.
	Run(ctx context.Context) error
	// Hold has Run act on the shards owned from now on: it returns once Run
	// no longer acts on the shards it dropped, and acts on those it added
	// once it has read them, without pausing work on the others.
	Hold(owned []int) error
}

// Run takes part in sharing the fleet until ctx ends: it keeps this replica's
// membership Lease, campaigns for the shards Assign gives it, and runs work
// with the shards whose Leases it holds, told of each change (Work.Hold). A
// shard is given up only after work dropped it, and work acts on a shard
// only once its Lease is held, so no two replicas act on one shard at once. A request on the Leases that fails is a Warning event on the
// Lease and a line of the log at info level (reporter), since without its
// Leases a replica does not act.
func Run(ctx context.Context, o Options, work Work) error {
	if o.Shards <= 0 || o.Identity == "" || o.Name == "" {
		return errors.New("sharding needs a positive number of shards, a name and an identity")
	}
	if o.Logger == nil {
		o.Logger = logging.NewNopLogger()
	}
	cfg := rest.CopyConfig(o.Config)
	cfg.Timeout = o.RenewDeadline
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return errors.Wrap(err, "cannot make the client of the replicas' leases")
	}
	recorder, stop := newRecorder(cs, o)
	defer stop()
	fence := NewFence(o.Name, o.Identity, o.RenewDeadline)
	leases := reportingLeases{LeaseInterface: cs.CoordinationV1().Leases(o.Namespace), report: newReporter(o, recorder), fence: fence}
	r := &replica{
		fence:  fence,
		o:      o,
		work:   work,
		leases: leases,
		members: &members{
			leases: leases, name: o.Name, identity: o.Identity, shards: o.Shards,
			duration: o.LeaseDuration, now: time.Now,
		},
		events:   make(chan event),
		electing: map[int]*elector{},
		tried:    map[int]string{},
	}
	return r.run(ctx)
}

// newRecorder is a replica's recorder of events, written by cs and
// coalesced as EventCorrelation says, and what stops it.
func newRecorder(cs kubernetes.Interface, o Options) (record.EventRecorder, func()) {
	b := record.NewBroadcaster(record.WithCorrelatorOptions(EventCorrelation()))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: o.Name, Host: o.Identity}), b.Shutdown
}

type replica struct {
	o       Options
	work    Work
	leases  coordinationclient.LeasesGetter
	members *members
	fence   *Fence

	events   chan event
	electing map[int]*elector // shards campaigned for, held or not
	wanted   []int
	stale    map[int]*coordinationv1.Lease // shard Leases nobody renews
	tried    map[int]string                // the version of each taken over
	held     []int
	changed  time.Time // when held last changed
	retryAt  time.Time // when work that failed may start again

	engine *engine
}

// An event says that this replica took a shard's Lease, or that its
// campaign for it ended without being resigned: the Lease was lost.
type event struct {
	shard int
	taken bool
}

type elector struct {
	cancel context.CancelFunc
	done   chan struct{}

	// mu orders the two events of a campaign: client-go reports a taken
	// Lease from a goroutine of its own, which may run after it was lost.
	mu    sync.Mutex
	ended bool
}

type engine struct {
	owned  []int
	cancel context.CancelFunc
	done   chan error
}

// settle is how long a replica waits for more of its wanted shards before it
// has work hold those it holds: shards freed at once (a replica leaving)
// arrive within a retry or two, and are added together.
const settle = 2 * time.Second

func (r *replica) run(ctx context.Context) error {
	shares := make(chan share, 1)
	go r.watchMembers(ctx, shares)
	tick := time.NewTicker(r.o.RetryPeriod)
	defer tick.Stop()
	defer r.leave()
	for {
		select {
		case <-ctx.Done():
			return nil
		case sh := <-shares:
			if !slices.Equal(sh.wanted, r.wanted) {
				r.o.Logger.Info("The replicas' shares changed", "shards", Names(sh.wanted))
				r.wanted = sh.wanted
			}
			r.stale = sh.stale
		case e := <-r.events:
			r.onEvent(e)
		case <-tick.C:
		case err := <-r.engineDone():
			r.o.Logger.Info("Work on the replica's shards stopped; starting it again", "shards", Names(r.engine.owned), "error", err)
			r.o.Metrics.setActing(r.engine.owned, false)
			r.engine = nil
			r.retryAt = time.Now().Add(settle) // not in a tight loop
		}
		r.converge(ctx)
	}
}

// A share is what the replica should hold, and which of those shards'
// Leases it may take at once.
type share struct {
	wanted []int
	stale  map[int]*coordinationv1.Lease
}

// watchMembers renews this replica's membership every retry period, reads
// who is alive and sends the shards it should hold. It runs apart from the
// loop, so that an API server that does not answer never delays the loop's
// stopping work on a lost shard.
func (r *replica) watchMembers(ctx context.Context, shares chan share) {
	for {
		if sh, ok := r.refresh(ctx); ok {
			select {
			case <-shares: // only the latest counts
			default:
			}
			shares <- sh
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.o.RetryPeriod):
		}
	}
}

// refresh renews this replica's membership and reads who is alive, to know
// the shards it should hold. The Leases' client reports a failed request
// (reporter); the debug lines here say what the replica does about it.
func (r *replica) refresh(ctx context.Context) (share, bool) {
	ctx, cancel := context.WithTimeout(ctx, r.o.RenewDeadline)
	defer cancel()
	if err := r.members.renew(ctx); err != nil {
		r.o.Logger.Debug("Cannot renew the replica's membership", "error", err)
	}
	v, err := r.members.read(ctx)
	if err != nil {
		r.o.Logger.Debug("Cannot read the live replicas; keeping the shards wanted", "error", err)
		return share{}, false
	}
	return share{wanted: Owned(Assign(r.o.Shards, v.live), r.o.Identity), stale: v.stale}, true
}

func (r *replica) onEvent(e event) {
	if e.taken {
		if !slices.Contains(r.held, e.shard) {
			r.held = append(r.held, e.shard)
			slices.Sort(r.held)
			r.changed = time.Now()
			r.o.Metrics.setHeld([]int{e.shard}, true)
		}
		return
	}
	delete(r.electing, e.shard)
	r.drop(e.shard)
	// Lost without giving it up: another replica may act on it once its
	// Lease runs out, so drop it at once; converge campaigns for it again.
	if r.engine != nil && slices.Contains(r.engine.owned, e.shard) {
		r.o.Logger.Info("Lost a shard's lease; no longer acting on it", "shard", Name(e.shard))
		r.hold(without(r.engine.owned, []int{e.shard}))
	}
}

// converge gives up the shards no longer wanted (after work dropped them),
// campaigns for the wanted ones, and has work hold those held.
func (r *replica) converge(ctx context.Context) {
	release, take := Diff(r.campaigned(), r.wanted)
	if len(release) > 0 {
		if r.engine != nil && slices.ContainsFunc(release, func(i int) bool { return slices.Contains(r.engine.owned, i) }) {
			r.hold(without(r.engine.owned, release))
		}
		for _, i := range release {
			r.resign(i)
		}
	}
	for _, i := range take {
		r.campaign(ctx, i)
	}
	r.takeOverStale(ctx)
	if r.engine != nil && slices.Equal(r.engine.owned, r.held) {
		return
	}
	if r.engine == nil && len(r.held) == 0 {
		return
	}
	// Start at once with every wanted shard held; otherwise let more arrive.
	if (!slices.Equal(r.held, r.wanted) && time.Since(r.changed) < settle) || time.Now().Before(r.retryAt) {
		return
	}
	if r.engine == nil {
		r.startEngine(ctx)
		return
	}
	r.hold(r.held)
}

// without is owned but the shards in drop.
func without(owned, drop []int) []int {
	return slices.DeleteFunc(slices.Clone(owned), func(i int) bool { return slices.Contains(drop, i) })
}

// hold has work act on owned from now on.
func (r *replica) hold(owned []int) {
	e := r.engine
	dropped, added := Diff(e.owned, owned)
	// Nothing is written for a shard dropped from here on, and its Lease
	// is given up only once its reconciles under way ended.
	r.fence.dropAndWait(Names(dropped), r.o.RenewDeadline)
	r.o.Metrics.setActing(dropped, false)
	e.owned = slices.Clone(owned)
	if err := r.work.Hold(e.owned); err != nil {
		r.o.Logger.Info("Cannot change the shards the replica acts on", "shards", Names(e.owned), "error", err)
	}
	if len(added) > 0 {
		r.o.Logger.Info("Acting on the replica's shards", "shards", Names(e.owned), "added", Names(added))
	}
	r.o.Metrics.setActing(added, true)
}

// takeOverStale takes the Leases of the shards this replica campaigns for
// that nobody renewed for a lease duration: a replica that died left them.
// The campaign's next try then finds itself the holder, rather than timing
// the Lease out again from its own first look. Someone else's write since
// the read makes a take-over fail, and the campaign goes on as usual. Each
// version of a Lease is tried once.
func (r *replica) takeOverStale(ctx context.Context) {
	for i, l := range r.stale {
		if r.electing[i] == nil || slices.Contains(r.held, i) || r.tried[i] == l.ResourceVersion {
			continue
		}
		r.tried[i] = l.ResourceVersion
		go func() {
			ctx, cancel := context.WithTimeout(ctx, r.o.RenewDeadline)
			defer cancel()
			if err := r.members.takeOver(ctx, l); err != nil {
				r.o.Logger.Debug("Cannot take over a shard's lease at once", "shard", Name(i), "error", err)
			}
		}()
	}
}

func (r *replica) campaigned() []int {
	out := make([]int, 0, len(r.electing))
	for i := range r.electing {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// campaign runs client-go's leader election for shard i's Lease until
// resigned; it tells the loop when the Lease is taken and when it is lost.
func (r *replica) campaign(ctx context.Context, i int) {
	ctx, cancel := context.WithCancel(ctx)
	e := &elector{cancel: cancel, done: make(chan struct{})}
	r.electing[i] = e
	name := r.o.Name + "-shard-" + Name(i)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: r.o.Namespace, Name: name},
		Client:     r.leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: r.o.Identity},
		// read lists the shard Leases with the replicas'.
		Labels: map[string]string{LabelReplicaOf: r.o.Name},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: r.o.LeaseDuration,
		RenewDeadline: r.o.RenewDeadline,
		RetryPeriod:   r.o.RetryPeriod,
		// The loop releases the Lease itself once resigned: client-go's
		// release on cancel would also run after a lost renewal, and hold up
		// telling the loop, which must stop acting at once, for as long as
		// a server that does not answer takes to time out.
		ReleaseOnCancel: false,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				e.mu.Lock()
				defer e.mu.Unlock()
				if !e.ended {
					r.tell(ctx, event{shard: i, taken: true})
				}
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		// Only options that Run's caller validated make this fail.
		r.o.Logger.Info("Cannot campaign for a shard", "shard", Name(i), "error", err)
		close(e.done)
		return
	}
	go func() {
		defer close(e.done)
		le.Run(ctx)
		e.mu.Lock()
		e.ended = true
		e.mu.Unlock()
		if ctx.Err() == nil {
			r.tell(ctx, event{shard: i})
		}
	}()
}

// tell hands e to the loop, unless the loop has stopped listening for this
// shard (resigned) or altogether.
func (r *replica) tell(ctx context.Context, e event) {
	select {
	case r.events <- e:
	case <-ctx.Done():
	}
}

// resign stops campaigning for shard i and releases its Lease.
func (r *replica) resign(i int) {
	e := r.electing[i]
	delete(r.electing, i)
	e.cancel()
	<-e.done
	// Even when the loop has not heard yet that the Lease was taken:
	// release reads who holds it.
	ctx, cancel := context.WithTimeout(context.Background(), r.o.RenewDeadline)
	defer cancel()
	if err := r.members.release(ctx, r.o.Name+"-shard-"+Name(i)); err != nil {
		r.o.Logger.Info("Cannot release a shard's lease; it runs out instead", "shard", Name(i), "error", err)
	}
	r.drop(i)
}

// drop forgets a shard held: nothing is written for it any more.
func (r *replica) drop(i int) {
	r.fence.drop(Name(i))
	if j := slices.Index(r.held, i); j >= 0 {
		r.held = slices.Delete(r.held, j, j+1)
		r.changed = time.Now()
		r.o.Metrics.setHeld([]int{i}, false)
	}
}

func (r *replica) startEngine(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	e := &engine{owned: slices.Clone(r.held), cancel: cancel, done: make(chan error, 1)}
	r.engine = e
	r.o.Logger.Info("Acting on the replica's shards", "shards", Names(e.owned))
	r.o.Metrics.setActing(e.owned, true)
	if err := r.work.Hold(e.owned); err != nil {
		r.o.Logger.Info("Cannot change the shards the replica acts on", "shards", Names(e.owned), "error", err)
	}
	// Every reconcile of the share checks its writes against the fence.
	ctx = WithFence(ctx, r.fence)
	go func() { e.done <- r.work.Run(ctx) }()
}

// stopEngine stops work and waits until it returned.
func (r *replica) stopEngine() {
	if r.engine == nil {
		return
	}
	r.engine.cancel()
	if err := <-r.engine.done; err != nil {
		r.o.Logger.Info("Work on the replica's shards ended with an error", "shards", Names(r.engine.owned), "error", err)
	}
	r.o.Metrics.setActing(r.engine.owned, false)
	r.engine = nil
}

func (r *replica) engineDone() <-chan error {
	if r.engine == nil {
		return nil
	}
	return r.engine.done
}

// leave stops work, gives up every shard and deletes the membership Lease,
// so that the other replicas take this one's share without waiting for its
// Leases to run out.
func (r *replica) leave() {
	r.stopEngine()
	for _, i := range r.campaigned() {
		r.resign(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.o.RenewDeadline)
	defer cancel()
	if err := r.members.leave(ctx); err != nil {
		r.o.Logger.Info("Cannot delete the replica's lease", "error", err)
	}
}
