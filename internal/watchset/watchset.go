// Package watchset runs narrow watches that managed resources ask for while
// they reconcile: one named ConfigMap, the Secrets matching one selector in one
// namespace, the copies one rule made. Each watch is metadata only, filtered by
// the API server, started when the first managed resource needs it and stopped
// when the last one no longer does, on whichever cluster the managed resource
// acts on. So the provider caches what its managed resources reference, never
// every ConfigMap or Secret in a cluster, and hears of changes on remote
// clusters as quickly as on its own.
//
// Watches of one object by name coalesce: once more than a few of them name
// objects of one resource in one namespace, one metadata-only watch of that
// namespace serves them all, and routes each event to the owners of the
// object's name only. An informer costs an API-server watch and six
// goroutines, so a thousand managed resources naming a thousand ConfigMaps
// would otherwise hold a thousand watches; coalesced, watches grow with the
// namespaces in use, not with the references. Past wideAbove namespaces of
// one resource, one wide watch of the resource serves them all, so watches
// stop growing with namespaces too.
package watchset

// This file holds the Set: its state, under one mutex, and its life as a
// manager runnable. The Set's jobs are in files of their own: owners.go,
// which watches each owner holds and when informers start and stop;
// coalesce.go, watches of one name or label value sharing one informer;
// wide.go, a resource's groups in many namespaces sharing one informer;
// informer.go, the informers, their sync and their stores; lean.go, the
// informer each runs; route.go, which
// owners an event enqueues; reads.go and missed.go, the versions owners have
// already seen; ownwrites.go, the events of owners' own writes; slim.go, what
// a store keeps of an object; peers.go, counting owners per namespace.

import (
	"context"
	"sync"
	"unique"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/internal/ownwrite"
)

// A Watch is one narrow watch a managed resource needs.
type Watch struct {
	// Resource is watched, e.g. {Version: "v1", Resource: "configmaps"}.
	Resource schema.GroupVersionResource
	// Namespace limits the watch to one namespace; empty watches all.
	Namespace string
	// Labels and Fields are selectors the API server filters by, such as
	// "app=web" or "metadata.name=nginx-conf". Empty selects everything.
	//
	// A watch of exactly "metadata.name=<name>" in a namespace, without
	// labels, is a name watch: once more than coalesceAbove of them name
	// objects of one resource in one namespace, they share one watch of the
	// namespace instead of holding one each. Their owners see no difference
	// but the API-server watches and goroutines saved.
	Labels string
	Fields string
	// ReadLabels makes a watch a kind reads labels from, such as the
	// namespaces a rule selects by label: the store keeps the objects' labels
	// and deletion marks, so List can serve them, and an update that changes
	// neither is no event.
	ReadLabels bool
}

// key is a Watch on one cluster.
type key struct {
	cluster string
	Watch
}

// A Set runs the watches of one controller's managed resources and turns their
// events into reconcile requests of the managed resources that asked for them.
type Set struct {
	log    logging.Logger
	events chan event.TypedGenericEvent[notice]

	ctx  context.Context //nolint:containedctx // The lifetime of every watch: until Start returns.
	stop context.CancelFunc

	mu      sync.Mutex
	clients map[string]metadata.Interface
	// watches are the informers of one watch each; coalesced those serving
	// every name watch of a group; wide those serving every group of a
	// family (wide.go). named are the names of each group that watches run,
	// while it has none coalesced: a group is in coalesced or named, never both once
	// Ensure returns.
	watches   map[key]*running
	coalesced map[group]*running
	wide      map[family]*wideWatch
	named     map[group]map[string]struct{}
	// values are the owners of each value (name or label value) of each
	// group, whichever informer serves it; spaces the namespaces of each
	// family's groups.
	values map[group]map[string]*ownerSet
	spaces map[family]map[string]struct{}
	// owners are each owner's watches, as handles: many owners hold the
	// same few keys (a rule's ten copy watches), and a key is 120 bytes.
	owners   map[types.NamespacedName]map[unique.Handle[key]]struct{}
	interest map[types.NamespacedName]Interest
	// writes are owners' writes whose events are not theirs (Writing).
	writes *ownwrite.Filter[object]
	// reads are the version of each object each owner last read (Read).
	reads map[types.NamespacedName][]read
	// forgotten are called with each owner Forget forgets (OnForget).
	forgotten []func(types.NamespacedName)

	// peers count the owners' kind in each namespace (CountPeers); nil
	// counts none.
	peers *Peers

	// coalesceAbove and wideAbove are the package constants; tests lower or
	// raise them.
	coalesceAbove int
	wideAbove     int

	// startHook, set only by tests, runs as each watch starts with the watch's
	// context; its error fails the start.
	startHook func(ctx context.Context, w Watch) error
}

// New returns a Set. Add it to the manager, whose Start ends its watches.
func New(log logging.Logger) *Set {
	ctx, stop := context.WithCancel(context.Background())
	return &Set{
		log:       log,
		events:    make(chan event.TypedGenericEvent[notice], 1024),
		ctx:       ctx,
		stop:      stop,
		clients:   map[string]metadata.Interface{},
		watches:   map[key]*running{},
		coalesced: map[group]*running{},
		wide:      map[family]*wideWatch{},
		named:     map[group]map[string]struct{}{},
		values:    map[group]map[string]*ownerSet{},
		spaces:    map[family]map[string]struct{}{},
		owners:    map[types.NamespacedName]map[unique.Handle[key]]struct{}{},
		interest:  map[types.NamespacedName]Interest{},

		writes: ownwrite.New[object](),
		reads:  map[types.NamespacedName][]read{},

		coalesceAbove: coalesceAbove,
		wideAbove:     wideAbove,
	}
}

// Start blocks until ctx ends, then stops every watch. It makes the Set a
// manager runnable.
func (s *Set) Start(ctx context.Context) error {
	<-ctx.Done()
	s.stop()
	return nil
}
