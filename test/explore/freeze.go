package explore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

// grace is how long a freeze waits after its fence holds before it arms:
// room for a reconcile that began before the fence to finish its writes.
const grace = 3 * time.Second

// A freeze is a promise that the provider writes nothing to a set of
// objects: those in a denied namespace, the chaos agent's victims while its
// kill switch is on or their namespace is excluded, what a managed resource
// makes while it is under Observe. It holds from when the operation that
// makes it has settled (its fence, plus grace) until an operation lifts it.
// Once armed, every object in scope keeps the resourceVersion it had then,
// or the one the explorer's own write gave it since; none appears and none
// goes but by the explorer's hand.
type freeze struct {
	// cause names the operation, and lift removes the freeze by it.
	cause string
	scope []scan
	// fence says whether the provider has seen the operation.
	fence func(ctx context.Context, s *State) (bool, error)
	// sealed, when set, is a namespace no replica sends any request into,
	// read or write, once the freeze is armed.
	sealed  string
	fenced  time.Time
	armed   bool
	want    map[string]string
	armedAt time.Time
}

// A scan is one list of a freeze's scope: objects of kind in namespace,
// those whose labels match selector (all without one), or only names.
type scan struct {
	kind     string
	ns       string
	selector map[string]string
	names    []string
}

// kinds a scan lists.
var scanKinds = []string{"ConfigMap", KindDeployment, "Pod", KindClaim, KindService}

func key(kind, ns, name string) string { return kind + " " + ns + "/" + name }

func (c scan) covers(kind, ns, name string, ls map[string]string) bool {
	if c.kind != kind || c.ns != ns {
		return false
	}
	if len(c.names) > 0 && !slices.Contains(c.names, name) {
		return false
	}
	return labels.SelectorFromSet(c.selector).Matches(labels.Set(ls))
}

// list is what the scan sees now: each object's key and resourceVersion.
func (c scan) list(ctx context.Context, r client.Reader, into map[string]string) error {
	var l client.ObjectList
	switch c.kind {
	case "ConfigMap":
		l = &corev1.ConfigMapList{}
	case KindDeployment:
		l = &appsv1.DeploymentList{}
	case "Pod":
		l = &corev1.PodList{}
	case KindClaim:
		l = &corev1.PersistentVolumeClaimList{}
	case KindService:
		l = &corev1.ServiceList{}
	default:
		return errors.Errorf("no list of kind %s", c.kind)
	}
	if err := r.List(ctx, l, client.InNamespace(c.ns), client.MatchingLabels(c.selector)); err != nil {
		return errors.Wrapf(err, "cannot list %s in %s", c.kind, c.ns)
	}
	items, err := metaItems(l)
	if err != nil {
		return err
	}
	for _, o := range items {
		if len(c.names) == 0 || slices.Contains(c.names, o.GetName()) {
			into[key(c.kind, o.GetNamespace(), o.GetName())] = o.GetResourceVersion()
		}
	}
	return nil
}

func metaItems(l client.ObjectList) ([]client.Object, error) {
	var out []client.Object
	switch v := l.(type) {
	case *corev1.ConfigMapList:
		for i := range v.Items {
			out = append(out, &v.Items[i])
		}
	case *appsv1.DeploymentList:
		for i := range v.Items {
			out = append(out, &v.Items[i])
		}
	case *corev1.PodList:
		for i := range v.Items {
			out = append(out, &v.Items[i])
		}
	case *corev1.PersistentVolumeClaimList:
		for i := range v.Items {
			out = append(out, &v.Items[i])
		}
	case *corev1.ServiceList:
		for i := range v.Items {
			out = append(out, &v.Items[i])
		}
	default:
		return nil, errors.Errorf("unknown list %T", l)
	}
	return out, nil
}

// observe is what the freeze's scope holds now.
func (f *freeze) observe(ctx context.Context, r client.Reader) (map[string]string, error) {
	now := map[string]string{}
	for _, c := range f.scope {
		if err := c.list(ctx, r, now); err != nil {
			return nil, err
		}
	}
	return now, nil
}

// ownWrite is one write of the explorer's: the object's kind, key, labels
// and the resourceVersion it left ("" once deleted).
type ownWrite struct {
	kind, ns, name string
	labels         map[string]string
	rv             string
}

// absorb records the explorer's own writes in every armed freeze that
// covers them: they are no write of the provider's.
func (f *freeze) absorb(ws []ownWrite) {
	if !f.armed {
		return
	}
	for _, w := range ws {
		for _, c := range f.scope {
			if !c.covers(w.kind, w.ns, w.name, w.labels) {
				continue
			}
			k := key(w.kind, w.ns, w.name)
			if w.rv == "" {
				delete(f.want, k)
			} else {
				f.want[k] = w.rv
			}
		}
	}
}

// check arms the freeze once its fence has held for grace, and then says
// how the scope differs from what it holds.
func (f *freeze) check(ctx context.Context, s *State) error {
	if !f.armed {
		if f.fenced.IsZero() {
			ok, err := f.fence(ctx, s)
			if err != nil || !ok {
				return nil //nolint:nilerr // A fence that cannot be read yet has not held.
			}
			f.fenced = time.Now()
		}
		if time.Since(f.fenced) < grace {
			return nil
		}
		now, err := f.observe(ctx, s.World.c)
		if err != nil {
			return err
		}
		f.want, f.armed, f.armedAt = now, true, time.Now()
		s.logf("freeze armed: %s, %d objects", f.cause, len(now))
		return nil
	}
	now, err := f.observe(ctx, s.World.c)
	if err != nil {
		return err
	}
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(now)) {
		want, ok := f.want[k]
		switch {
		case !ok:
			bad = append(bad, k+" appeared")
		case want != now[k]:
			bad = append(bad, fmt.Sprintf("%s written (resourceVersion %s, %s when frozen or last written by the explorer)", k, now[k], want))
		}
	}
	for k := range f.want {
		if _, ok := now[k]; !ok {
			bad = append(bad, k+" deleted")
		}
	}
	if f.sealed != "" && s.Fleet.requests != nil {
		for _, r := range s.Fleet.requests.since(f.sealed, f.armedAt) {
			bad = append(bad, "request "+r.String())
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return errors.Errorf("%s, frozen since %s: %s", f.cause, f.armedAt.Format("15:04:05.000"), strings.Join(bad, "; "))
	}
	return nil
}

// configSeen is a fence: every live replica's cache holds the world's
// config at resourceVersion rv or later, so every reconcile that connects
// from now on reads it.
func configSeen(rv string) func(ctx context.Context, s *State) (bool, error) {
	want, _ := strconv.ParseUint(rv, 10, 64)
	return func(ctx context.Context, s *State) (bool, error) {
		for _, c := range s.Fleet.Caches() {
			cpc := &apisv1alpha1.ClusterProviderConfig{}
			if err := c.Get(ctx, types.NamespacedName{Name: s.World.Config()}, cpc); err != nil {
				return false, err
			}
			if got, _ := strconv.ParseUint(cpc.ResourceVersion, 10, 64); got < want {
				return false, nil
			}
		}
		return true, nil
	}
}

// generationSeen is a fence: managed resource mg has reconciled generation
// gen (its Synced condition's observedGeneration).
func generationSeen(mg resource.Managed, gen int64) func(ctx context.Context, s *State) (bool, error) {
	return func(ctx context.Context, s *State) (bool, error) {
		if err := s.World.c.Get(ctx, client.ObjectKeyFromObject(mg), mg); err != nil {
			return false, err
		}
		return mg.GetCondition(xpv2.TypeSynced).ObservedGeneration >= gen, nil
	}
}

// namespaceScope is everything of the scanned kinds in ns.
func namespaceScope(ns string) []scan {
	out := make([]scan, 0, len(scanKinds))
	for _, k := range scanKinds {
		out = append(out, scan{kind: k, ns: ns})
	}
	return out
}

// victimScope is the chaos agent's victims in namespaces.
func victimScope(namespaces ...string) []scan {
	var out []scan
	for _, ns := range namespaces {
		for _, k := range []string{"Pod", KindDeployment, "ConfigMap"} {
			out = append(out, scan{kind: k, ns: ns, selector: map[string]string{victimLabel: "true"}})
		}
	}
	return out
}

// freezeOn adds a freeze.
func (s *State) freezeOn(cause string, scope []scan, fence func(ctx context.Context, s *State) (bool, error)) *freeze {
	f := &freeze{cause: cause, scope: scope, fence: fence}
	s.frozen = append(s.frozen, f)
	return f
}

// lift removes the freezes of cause.
func (s *State) lift(cause string) {
	s.frozen = slices.DeleteFunc(s.frozen, func(f *freeze) bool { return f.cause == cause })
}

// wrote records an explorer's write of o, which is no write of the
// provider's to any freeze.
func (s *State) wrote(o client.Object) {
	s.own = append(s.own, ownWrite{kind: kindOf(o), ns: o.GetNamespace(), name: o.GetName(), labels: o.GetLabels(), rv: o.GetResourceVersion()})
}

// removed records an explorer's deletion of o.
func (s *State) removed(o client.Object) {
	s.own = append(s.own, ownWrite{kind: kindOf(o), ns: o.GetNamespace(), name: o.GetName(), labels: o.GetLabels()})
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *appsv1.Deployment:
		return KindDeployment
	case *corev1.Pod:
		return "Pod"
	case *corev1.PersistentVolumeClaim:
		return KindClaim
	case *corev1.Service:
		return KindService
	}
	return fmt.Sprintf("%T", o)
}

// settleOwn hands the explorer's writes of the last operation to the
// armed freezes.
func (s *State) settleOwn() {
	for _, f := range s.frozen {
		f.absorb(s.own)
	}
	s.own = nil
}

// nothingWrittenFrozen is the safety oracle of the freezes: each armed one
// holds, and pending ones arm once their fence has held for grace.
func nothingWrittenFrozen(ctx context.Context, s *State) error {
	s.settleOwn()
	for _, f := range s.frozen {
		if err := f.check(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
