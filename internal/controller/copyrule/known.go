package copyrule

import (
	"cmp"
	"context"
	"encoding/hex"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// readEachUpTo is how many copies a reconcile reads one by one; more are
// listed at once. A list by the rule's label is a scan of every object of the
// kind in the cluster on the API server, a get is a lookup: a fleet of N
// rules each listing its copies on every reconcile costs the API server
// O(N²), and reading each keeps a converge linear (BenchmarkFleet's
// copyrule scenarios, against their raw client's floor).
const readEachUpTo = 32

// knownCopies is what the provider knows of each rule's copies without
// reading them: for each copy, at the version it last read or wrote, the
// digests InSync compares. A copy the copies watch holds at that version
// needs no read, so a rule in sync reads none of its copies; one that
// someone else changed has a new version and is read again.
type knownCopies struct {
	mu     sync.Mutex
	byRule map[types.UID]*copyTable
	// uids are the rules' UIDs by name, to forget a rule whose deletion the
	// controller did not see to its end (a finalizer removed by hand).
	uids map[types.NamespacedName]types.UID
	// resumes are, per rule, how its reconciles since the provider started
	// decided: whether they may trust its status's digest (resume).
	resumes map[types.UID]resumeState
}

// resumeState is how a rule's reconciles since the provider started decided.
type resumeState struct {
	// waiting is when it first waited for its watches.
	waiting time.Time
	// decided: by reading, or from its digest. Reconciles until until may
	// decide from its digest again, for events of the watches it resumed
	// from that reached it late; its polls, later, read.
	decided bool
	until   time.Time
}

// knownCopy is one copy's summary, about a hundred bytes: never its data.
type knownCopy struct {
	uid, version   string
	content, marks digest
	typ            corev1.SecretType
	takenOver      bool
}

// digest is a Summary's hex digest as the bytes it encodes: every copy of
// every rule is remembered, and the bytes are half the size of the hex
// string, with no string header (BenchmarkFleet's heap per resource).
type digest [16]byte

// digestOf returns the digest h encodes; false for anything but Hash's form.
func digestOf(h string) (digest, bool) {
	var d digest
	if hex.DecodedLen(len(h)) != len(d) {
		return d, false
	}
	_, err := hex.Decode(d[:], []byte(h))
	return d, err == nil
}

func (d digest) String() string { return hex.EncodeToString(d[:]) }

func newKnownCopies() *knownCopies {
	return &knownCopies{byRule: map[types.UID]*copyTable{}, uids: map[types.NamespacedName]types.UID{}, resumes: map[types.UID]resumeState{}}
}

// resuming reports whether rule may decide from its digest at now: it has
// not decided since the provider started, or did from its digest until
// recently.
func (c *knownCopies) resuming(rule types.UID, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.resumes[rule]
	return !st.decided || now.Before(st.until)
}

// waited reports whether rule may wait for its watches at now: it has not
// decided, and first waited less than maxResumeWait before.
func (c *knownCopies) waited(rule types.UID, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.resumes[rule]
	if st.decided {
		return false
	}
	if st.waiting.IsZero() {
		st.waiting = now
		c.resumes[rule] = st
	}
	return now.Before(st.waiting.Add(maxResumeWait))
}

// waitEnds returns when rule's wait for its watches ends, and whether it
// waits: it waited and has not decided since. A watch that never syncs
// enqueues nobody, so the rule's next reconcile must come by then, not at
// its poll (untilWaitEnds).
func (c *knownCopies) waitEnds(rule types.UID) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.resumes[rule]
	if st.decided || st.waiting.IsZero() {
		return time.Time{}, false
	}
	return st.waiting.Add(maxResumeWait), true
}

// resumed records that rule decided: from its digest, trusted again until
// until, or by reading (a zero until). A rule that already decided from its
// digest keeps its first until.
func (c *knownCopies) resumed(rule Owner, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.resumes[types.UID(rule.UID)]
	if !st.decided || until.IsZero() {
		st.until = until
	}
	st.decided = true
	c.resumes[types.UID(rule.UID)] = st
	c.name(rule)
}

// summarize returns what is remembered of o; false for what is never
// summarized: an immutable copy, whose replacement compares its data, and a
// summary not in Hash's form (never so but in tests), which is read again.
func summarize(o Object) (knownCopy, bool) {
	if o.Immutable || o.UID == "" || o.ResourceVersion == "" {
		return knownCopy{}, false
	}
	sum := Summary{}
	if o.Summary != nil {
		sum = *o.Summary
	} else {
		sum = Summary{Content: Hash(o), Marks: marks(o.Annotations)}
	}
	content, ok := digestOf(sum.Content)
	marks, ok2 := digestOf(sum.Marks)
	if !ok || !ok2 {
		return knownCopy{}, false
	}
	return knownCopy{uid: string(o.UID), version: o.ResourceVersion, content: content, marks: marks, typ: o.Type, takenOver: TakenOver(o)}, true
}

// object is the copy ref of rule owner as k remembers it.
func (k knownCopy) object(owner Owner, ref Ref) Object {
	o := Object{Type: k.typ, Summary: &Summary{Content: k.content.String(), Marks: k.marks.String()}}
	o.Namespace, o.Name, o.UID, o.ResourceVersion = ref.Namespace, ref.Name, types.UID(k.uid), k.version
	copyMark.Set(&o, owner.object())
	if k.takenOver {
		o.Annotations = map[string]string{AnnotationTakenOver: "true"}
	}
	return o
}

// of returns what is known of rule's copies, for the caller to keep.
func (c *knownCopies) of(rule types.UID) map[Ref]knownCopy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byRule[rule].clone()
}

// set makes copies all that is known of rule's copies.
func (c *knownCopies) set(rule Owner, copies []Object) {
	m := newCopyTable(copies)
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.len() == 0 {
		delete(c.byRule, types.UID(rule.UID))
		return
	}
	c.byRule[types.UID(rule.UID)] = m
	c.name(rule)
}

// name records rule's UID by its name. A rule of that name known by another
// UID was deleted and made again: what is known of its copies goes. c.mu is
// held.
func (c *knownCopies) name(rule Owner) {
	n, uid := types.NamespacedName{Namespace: rule.Namespace, Name: rule.Name}, types.UID(rule.UID)
	if was, ok := c.uids[n]; ok && was != uid {
		delete(c.byRule, was)
		delete(c.resumes, was)
	}
	c.uids[n] = uid
}

// wrote records o as rule wrote it: a copy at its new version, or, when it
// is gone or no copy of the rule any more, nothing.
func (c *knownCopies) wrote(rule Owner, ref Ref, o *Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.byRule[types.UID(rule.UID)]
	if o == nil || !OwnedBy(rule, *o) {
		m.del(ref)
		return
	}
	k, ok := summarize(*o)
	if !ok {
		m.del(ref)
		return
	}
	if m == nil {
		m = &copyTable{}
		c.byRule[types.UID(rule.UID)] = m
		c.name(rule)
	}
	m.put(ref, k)
}

// copyTable is what is known of one rule's copies: a slice sorted by ref
// while they are few, a map beyond, as a map's smallest tables hold more
// than a rule's few copies need (BenchmarkFleet's heap per resource).
type copyTable struct {
	few  []knownEntry
	many map[Ref]knownCopy
}

type knownEntry struct {
	ref Ref
	knownCopy
}

// fewCopies is how many copies a copyTable keeps in its slice.
const fewCopies = 32

func compareRefs(a knownEntry, b Ref) int {
	return cmp.Or(cmp.Compare(a.ref.Namespace, b.Namespace), cmp.Compare(a.ref.Name, b.Name))
}

// newCopyTable is a table of what is known of copies.
func newCopyTable(copies []Object) *copyTable {
	t := &copyTable{}
	if len(copies) > fewCopies {
		t.many = make(map[Ref]knownCopy, len(copies))
		for _, o := range copies {
			if k, ok := summarize(o); ok {
				t.many[Ref{o.Namespace, o.Name}] = k
			}
		}
		return t
	}
	few := make([]knownEntry, 0, len(copies))
	for _, o := range copies {
		if k, ok := summarize(o); ok {
			few = append(few, knownEntry{Ref{o.Namespace, o.Name}, k})
		}
	}
	slices.SortStableFunc(few, func(a, b knownEntry) int { return compareRefs(a, b.ref) })
	// The last of a ref wins, as it would in a map.
	out := few[:0]
	for i, e := range few {
		if i+1 < len(few) && few[i+1].ref == e.ref {
			continue
		}
		out = append(out, e)
	}
	t.few = slices.Clip(out)
	return t
}

func (t *copyTable) len() int {
	if t == nil {
		return 0
	}
	return len(t.few) + len(t.many)
}

func (t *copyTable) put(ref Ref, k knownCopy) {
	if t.many != nil {
		t.many[ref] = k
		return
	}
	i, found := slices.BinarySearchFunc(t.few, ref, compareRefs)
	if found {
		t.few[i].knownCopy = k
		return
	}
	if len(t.few) < fewCopies {
		// Grown by one, not doubled as append would: most rules' copies are
		// all written once, and a slice of 16 for 10 held as much as the map.
		few := make([]knownEntry, len(t.few)+1)
		copy(few, t.few[:i])
		few[i] = knownEntry{ref, k}
		copy(few[i+1:], t.few[i:])
		t.few = few
		return
	}
	t.many = make(map[Ref]knownCopy, len(t.few)+1)
	for _, e := range t.few {
		t.many[e.ref] = e.knownCopy
	}
	t.many[ref], t.few = k, nil
}

// del forgets ref; a nil table knows nothing to forget.
func (t *copyTable) del(ref Ref) {
	switch {
	case t == nil:
	case t.many != nil:
		delete(t.many, ref)
	default:
		if i, found := slices.BinarySearchFunc(t.few, ref, compareRefs); found {
			t.few = slices.Delete(t.few, i, i+1)
		}
	}
}

// clone returns what t knows as a map, for the caller to keep.
func (t *copyTable) clone() map[Ref]knownCopy {
	if t == nil {
		return nil
	}
	if t.many != nil {
		return maps.Clone(t.many)
	}
	out := make(map[Ref]knownCopy, len(t.few))
	for _, e := range t.few {
		out[e.ref] = e.knownCopy
	}
	return out
}

// drop forgets rule's copies: the rule is gone.
func (c *knownCopies) drop(rule Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byRule, types.UID(rule.UID))
	delete(c.resumes, types.UID(rule.UID))
	n := types.NamespacedName{Namespace: rule.Namespace, Name: rule.Name}
	if c.uids[n] == types.UID(rule.UID) {
		delete(c.uids, n)
	}
}

// forget forgets the copies of the rule named name, gone from the API server.
func (c *knownCopies) forget(name types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if uid, ok := c.uids[name]; ok {
		delete(c.byRule, uid)
		delete(c.resumes, uid)
		delete(c.uids, name)
	}
}

// copiesWatch is the watch of rule cr's copies: every object of the copies'
// kind that carries its mark, in any namespace.
func copiesWatch(cr *v1alpha1.CopyRule, kind Mapping) watchset.Watch {
	return watchset.Watch{Resource: kind.Resource, Labels: copyMark.Selector(cr).String()}
}

// copies returns the rule's copies, reading only what it must: those the
// copies watch holds at a version known come from what is known, the others
// are read, one by one when few, in one list when many. Before the watch
// has synced they are listed. A copy in a namespace out of reach is never
// read: it is left in place whatever it holds, so its name from the watch
// is all the plan needs, and it is not remembered, so that it is read
// once the namespace is in reach again.
func (e *external) copies(ctx context.Context, cr *v1alpha1.CopyRule, reachable func(ns string) error) ([]Object, error) {
	own := owner(cr)
	listed, ok := e.watches.List(e.cluster, copiesWatch(cr, e.dst))
	if !ok {
		return e.listCopies(ctx, cr)
	}
	known := e.known.of(cr.GetUID())
	out := make([]Object, 0, len(listed))
	var unread []Ref
	var outOfReach []Object
	for _, m := range listed {
		ref := Ref{m.Namespace, m.Name}
		k, ok := known[ref]
		delete(known, ref)
		switch {
		case ok && k.uid == string(m.UID) && k.version == m.ResourceVersion:
			out = append(out, k.object(own, ref))
		case reachable(ref.Namespace) != nil:
			outOfReach = append(outOfReach, knownCopy{uid: string(m.UID), version: m.ResourceVersion}.object(own, ref))
		default:
			unread = append(unread, ref)
		}
	}
	// Written, and not in the watch yet: read, never taken for gone.
	for ref := range known {
		if reachable(ref.Namespace) == nil {
			unread = append(unread, ref)
		}
	}
	if len(unread) > readEachUpTo {
		return e.listCopies(ctx, cr)
	}
	for _, ref := range unread {
		o, err := e.readCopy(ctx, cr, ref)
		if err != nil {
			return nil, err
		}
		if o != nil {
			out = append(out, *o)
		}
	}
	e.known.set(own, out)
	out = append(out, outOfReach...)
	slices.SortFunc(out, func(a, b Object) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// readCopy reads the rule's copy ref; nil when it is gone or no longer the
// rule's.
func (e *external) readCopy(ctx context.Context, cr *v1alpha1.CopyRule, ref Ref) (*Object, error) {
	kind := e.dst
	o, found, err := get(ctx, e.cluster.Client, kind, ref)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot get the rule's %s copy %q in namespace %q", kind, ref.Name, ref.Namespace)
	}
	if !found || !OwnedBy(owner(cr), o) {
		return nil, nil // Gone, or no copy of the rule: nothing to plan from.
	}
	return &o, nil
}

// listCopies lists the rule's copies and remembers them.
func (e *external) listCopies(ctx context.Context, cr *v1alpha1.CopyRule) ([]Object, error) {
	objs, err := readCopies(ctx, e.cluster.Client, e.dst, cr)
	if err != nil {
		return nil, err
	}
	e.known.set(owner(cr), objs)
	return objs, nil
}

// whole returns copies with the summaries among refs replaced by the objects
// themselves, as an update or a release writes them whole; a copy gone since
// is left out.
func (e *external) whole(ctx context.Context, cr *v1alpha1.CopyRule, copies []Object, refs []Ref) ([]Object, error) {
	if len(refs) > readEachUpTo {
		return e.listCopies(ctx, cr)
	}
	read := make(map[Ref]*Object, len(refs))
	for _, ref := range refs {
		o, err := e.readCopy(ctx, cr, ref)
		if err != nil {
			return nil, err
		}
		read[ref] = o
	}
	out := make([]Object, 0, len(copies))
	for _, c := range copies {
		ref := Ref{c.Namespace, c.Name}
		o, ok := read[ref]
		switch {
		case !ok:
			out = append(out, c)
		case o != nil:
			out = append(out, *o)
		}
	}
	e.known.set(owner(cr), out)
	return out, nil
}

// summarized returns the refs of the copies among copies that are summaries
// and that actions write whole: updates and releases.
func summarized(copies []Object, actions []Action) []Ref {
	partial := map[Ref]bool{}
	for _, c := range copies {
		if c.Summary != nil {
			partial[Ref{c.Namespace, c.Name}] = true
		}
	}
	var out []Ref
	for _, a := range actions {
		ref := Ref{a.Object.Namespace, a.Object.Name}
		if (a.Op == OpUpdate || a.Op == OpRelease) && partial[ref] {
			out = append(out, ref)
		}
	}
	return out
}
