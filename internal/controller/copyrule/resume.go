package copyrule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// A restart knows nothing of any rule's copies, yet the watches the rules
// join list every one of those objects' versions anyway. So a rule in sync
// keeps in its status a digest of what it decided from (Inputs), and the
// first reconcile after a restart compares it with what its watches hold:
// the same versions of the same objects, the same targets and the same spec
// make the same plan, which is to write nothing, and the rule reads none of
// its sources and copies (TestCopyRuleRestartReadsOnlyWhatChanged).

// maxResumeWait bounds how long a rule's first reconciles wait for its
// watches to sync: a watch that never does (it may be refused) must not keep
// the rule from reading; the poll hook (untilWaitEnds) reconciles it then.
// A bound on time, not on the reconciles that waited: the last of a rule's
// watches to sync enqueues it, but a change while they list, the list of a
// watch it shares that began before it waited, and the rule's own events
// may too, so a rule may wait more than once before they sync
// (TestResumesOncePerStart, TestCopyRuleRestartReadsOnlyWhatChanged).
const maxResumeWait = time.Minute

// A Version is an object as a digest knows it: which object and which
// version of it. Any write changes the version.
type Version struct {
	Namespace, Name, UID, ResourceVersion string
}

// Inputs are what a rule found in sync decided from: its spec's generation,
// the clusters it reads and writes and how far it may reach, the versions of
// its sources and copies, and its targets. Equal inputs make the same plan.
type Inputs struct {
	Generation int64     `json:"g"`
	Clusters   []string  `json:"c"`
	Reach      string    `json:"r"`
	Sources    []Version `json:"s"`
	Copies     []Version `json:"o"`
	Targets    Targets   `json:"t"`
}

// Digest is the hex digest of in; the order of its lists does not matter.
func (in Inputs) Digest() string {
	in.Sources, in.Copies = sortedVersions(in.Sources), sortedVersions(in.Copies)
	t := in.Targets
	in.Targets = Targets{Namespaces: slices.Sorted(slices.Values(t.Namespaces)), Missing: slices.Sorted(slices.Values(t.Missing)), OutOfReach: t.OutOfReach}
	b, _ := json.Marshal(in) //nolint:errchkjson // Strings, numbers and maps of strings always marshal.
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func sortedVersions(vs []Version) []Version {
	out := slices.Clone(vs)
	slices.SortFunc(out, func(a, b Version) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// versionsOf are the versions of objs.
func versionsOf(objs []Object) []Version {
	out := make([]Version, 0, len(objs))
	for _, o := range objs {
		out = append(out, Version{o.Namespace, o.Name, string(o.UID), o.ResourceVersion})
	}
	return out
}

// metaVersions are the versions of objects a watch holds.
func metaVersions(ms []*watchset.Object) []Version {
	out := make([]Version, 0, len(ms))
	for _, m := range ms {
		out = append(out, Version{m.Namespace, m.Name, string(m.UID), m.ResourceVersion})
	}
	return out
}

// reachKey is policies rs (the targets' side, then the sources') as a digest
// compares them: a change of either side's reach is a change of inputs.
func reachKey(rs ...reach.Policy) string {
	out := make([]any, 0, len(rs))
	for _, r := range rs {
		// A nil selector selects nothing, an empty one everything: both print "".
		sel := "none"
		if r.Selector != nil {
			sel = "labels:" + r.Selector.String()
		}
		out = append(out, []any{r.Config, r.OwnNamespace, r.Namespaces, sel, r.Denied, r.ProviderNamespace})
	}
	b, _ := json.Marshal(out) //nolint:errchkjson // Strings and bools always marshal.
	return string(b)
}

// inputs are the inputs of rule cr with sources and copies, writing to
// e.cluster and reading from src.
func (e *external) inputs(cr *v1alpha1.CopyRule, src *target.Cluster, sources, copies []Version, t Targets) Inputs {
	return Inputs{
		Generation: cr.GetGeneration(), Clusters: []string{e.cluster.ID, src.ID}, Reach: reachKey(e.cluster.Reach, src.Reach),
		Sources: sources, Copies: copies, Targets: t,
	}
}

// decided is what Observe decided from, for Update to make the digest of
// the state its writes leave.
type decided struct {
	sources []Version
	targets Targets
}

// describedByInputs reports whether a rule's plan, carried out, leaves a state its
// inputs alone describe: every intended copy in sync, no problem, nothing
// skipped, and no copy beyond the intended ones (one left out of reach
// could come into reach without any version changing).
func describedByInputs(p Plan, inSyncCopies, failed, copies int, problems []v1alpha1.CopyProblem) bool {
	return failed == 0 && len(problems) == 0 && p.Skipped == 0 && inSyncCopies == p.Intended && copies == p.Intended
}

// heldSources are the versions of the sources rule p selects in namespaces
// nss as the rule's watches on cluster c hold them; false when one has not
// synced. Like readSources, a name and the selector picking the same object
// count it once.
func (e *external) heldSources(c *target.Cluster, p v1alpha1.CopyRuleParameters, nss []string) ([]Version, bool) {
	var out []Version
	res := e.src.Resource
	seen := map[Ref]bool{}
	add := func(w watchset.Watch) bool {
		l, ok := e.watches.List(c, w)
		for _, v := range metaVersions(l) {
			if r := (Ref{v.Namespace, v.Name}); !seen[r] {
				seen[r] = true
				out = append(out, v)
			}
		}
		return ok
	}
	for _, w := range selectorWatches(p, e.src, nss) {
		if !add(w) {
			return nil, false
		}
	}
	for _, ns := range nss {
		for _, n := range p.Names {
			if !add(watchset.Watch{Resource: res, Namespace: ns, Fields: nameField + n}) {
				return nil, false
			}
		}
	}
	return out, true
}

// nameField prefixes the field selector of a watch of one object by name.
const nameField = "metadata.name="

// resumption is what a rule's reconcile after a restart found (resume).
type resumption int

const (
	// readAll: no digest to trust, or what the watches hold differs; the
	// rule reads as always.
	readAll resumption = iota
	// waitForWatches: the rule's watches have not synced; it is enqueued
	// again when they have.
	waitForWatches
	// resumed: the watches hold what the rule last found in sync.
	resumed
)

// resume decides a rule's first reconcile since the provider started from
// its status's digest and its watches, which it joins; and, for resumeFor
// after, the reconciles that late events of those watches bring. Any other
// reconcile reads: polls are the safety net for what a watch might not have
// told, and never come that early.
func (e *external) resume(cr *v1alpha1.CopyRule, src *target.Cluster, srcNSs []string, t Targets) (resumption, error) {
	uid := cr.GetUID()
	if !e.known.resuming(uid, e.now()) {
		return readAll, nil
	}
	// A spec changed since its last sync is never in sync: returning as if
	// it were, while its watches sync, would mark the new generation Synced.
	if cr.Status.AtProvider.SyncedDigest == "" || cr.GetCondition(xpv2.TypeSynced).ObservedGeneration != cr.GetGeneration() {
		e.known.resumed(owner(cr), time.Time{})
		return readAll, nil
	}
	own := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	// The sources as last read: a watch joined, or listing, that shows one
	// at that version is no news. Without this, every rule joining a
	// running watch of its sources was reconciled again for nothing, and
	// that reconcile read everything.
	if o := cr.Status.AtProvider; len(o.ObservedSources) <= readEachUpTo {
		for _, s := range o.ObservedSources {
			e.watches.Read(own, src, e.src.Resource, s.Namespace, s.Name, s.ResourceVersion)
		}
	}
	if err := e.watch(cr, nil); err != nil {
		return readAll, err
	}
	if !e.watches.WhenSynced(own) && e.known.waited(uid, e.now()) {
		return waitForWatches, nil
	}
	sources, ok := e.heldSources(src, cr.Spec.ForProvider, srcNSs)
	if !ok {
		e.known.resumed(owner(cr), time.Time{})
		return readAll, nil
	}
	copies, ok := e.watches.List(e.cluster, copiesWatch(cr, e.dst))
	if !ok || e.inputs(cr, src, sources, metaVersions(copies), t).Digest() != cr.Status.AtProvider.SyncedDigest {
		e.known.resumed(owner(cr), time.Time{})
		return readAll, nil
	}
	e.known.resumed(owner(cr), e.now().Add(e.resumeFor))
	return resumed, nil
}

// digestWritten keeps in cr's status the digest of the state Update's
// writes left, when they brought every copy in sync: the rule's copies at
// the versions written or known, its sources and targets as Observe read
// them. A rule that converged and was never observed again since resumes
// after a restart like one observed in sync.
func (e *external) digestWritten(cr *v1alpha1.CopyRule, problems []v1alpha1.CopyProblem, written, failed int) {
	o := &cr.Status.AtProvider
	o.SyncedDigest = ""
	known := e.known.of(cr.GetUID())
	if e.source == nil || !describedByInputs(e.plan, e.plan.InSync+written, failed, len(known), problems) {
		return
	}
	copies := make([]Version, 0, len(known))
	for ref, k := range known {
		copies = append(copies, Version{ref.Namespace, ref.Name, k.uid, k.version})
	}
	o.SyncedDigest = e.inputs(cr, e.source, e.decided.sources, copies, e.decided.targets).Digest()
}
