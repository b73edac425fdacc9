// Package drift reports the changes other writers make to objects a managed
// resource keeps, as the provider repairs them: a DriftRepaired event naming
// the object and its fields (never their values), a counter by kind, and the
// last few in the resource's status.
package drift

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/apimetrics"
)

// ReasonRepaired is the reason of the event that reports a repaired drift.
const ReasonRepaired event.Reason = "DriftRepaired"

// A Reporter reports the drift one provider repairs. A nil Reporter (an
// external client built without its controller) records the events and the
// status, and counts nothing.
type Reporter struct {
	repaired *prometheus.CounterVec
}

// NewReporter returns a Reporter whose counter is registered with reg, or
// is the one already registered there: a test process builds several
// providers into one registry, and a sharded replica builds its share's
// controllers again if they fail.
func NewReporter(reg prometheus.Registerer) (*Reporter, error) {
	c, err := apimetrics.Existing(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clusterops_drift_repaired_total",
		Help: "Objects another writer changed or deleted that the provider repaired, by the kind of managed resource that keeps them (AppBundle, CopyRule, ImmortalContainer).",
	}, []string{"kind"}))
	if err != nil {
		return nil, errors.Wrap(err, "cannot register the drift metrics")
	}
	return &Reporter{repaired: c}, nil
}

// count adds n repairs of mgKind's objects to the counter.
func (r *Reporter) count(mgKind string, n int) {
	if r == nil {
		return
	}
	r.repaired.WithLabelValues(mgKind).Add(float64(n))
}

// Synced reports whether mg was last reconciled successfully at its current
// spec: what differs from it now, another writer changed. A spec changed
// since, or a reconcile that failed, is no drift.
func Synced(mg resource.Managed) bool {
	c := mg.GetCondition(xpv2.TypeSynced)
	return c.Status == corev1.ConditionTrue && c.ObservedGeneration == mg.GetGeneration()
}

// Of is the Drift of an object of kind (namespace, name) whose fields differ,
// at most MaxDriftFields of them listed.
func Of(kind, namespace, name string, fields []string) v1alpha1.Drift {
	d := v1alpha1.Drift{Kind: kind, Namespace: namespace, Name: name, Fields: fields}
	if n := len(fields) - v1alpha1.MaxDriftFields; n > 0 {
		d.Fields, d.MoreFields = fields[:v1alpha1.MaxDriftFields], int32(n) //nolint:gosec // Bounded by an object's fields.
	}
	return d
}

// Deleted is the Drift of an object another writer deleted.
func Deleted(kind, namespace, name string) v1alpha1.Drift {
	return Of(kind, namespace, name, []string{v1alpha1.DriftDeleted})
}

// Repaired reports d, repaired at now, of managed resource mg of kind
// mgKind: an event, the counter, and d first in recent, which keeps
// MaxRecentDrift entries.
func (r *Reporter) Repaired(rec event.Recorder, mg resource.Managed, mgKind string, recent *[]v1alpha1.Drift, d v1alpha1.Drift, now time.Time) {
	d.Time = metav1.NewTime(now)
	rec.Event(mg, event.Normal(ReasonRepaired, Message(d)))
	r.count(mgKind, 1)
	*recent = append([]v1alpha1.Drift{d}, (*recent)[:min(len(*recent), v1alpha1.MaxRecentDrift-1)]...)
}

// RepairedMore reports n more repairs of mg's objects, beyond those reported
// one by one: one event, and the counter.
func (r *Reporter) RepairedMore(rec event.Recorder, mg resource.Managed, mgKind string, n int) {
	rec.Event(mg, event.Normal(ReasonRepaired, fmt.Sprintf("%d more objects changed by other writers repaired", n)))
	r.count(mgKind, n)
}

// Message says what drifted and that it was repaired.
func Message(d v1alpha1.Drift) string {
	obj := fmt.Sprintf("%s %q", d.Kind, d.Name)
	if d.Namespace != "" {
		obj = fmt.Sprintf("%s %s/%s", d.Kind, d.Namespace, d.Name)
	}
	if slices.Equal(d.Fields, []string{v1alpha1.DriftDeleted}) {
		return obj + " was deleted by another writer; made again"
	}
	more := ""
	if d.MoreFields > 0 {
		more = fmt.Sprintf(" and %d more", d.MoreFields)
	}
	return fmt.Sprintf("%s changed by another writer at %s%s; repaired", obj, strings.Join(d.Fields, ", "), more)
}

// Fields returns, sorted, the paths at which want and got differ, both read
// through their JSON form: what a field holds is never part of a path, only
// map keys and list indexes are.
func Fields(want, got any) ([]string, error) {
	w, err := generic(want)
	if err != nil {
		return nil, err
	}
	g, err := generic(got)
	if err != nil {
		return nil, err
	}
	var out []string
	walk("", w, g, &out)
	slices.Sort(out)
	return out, nil
}

func generic(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot encode %T", v)
	}
	var out any
	return out, errors.Wrapf(json.Unmarshal(b, &out), "cannot decode %T", v)
}

// walk adds to out the paths below path at which w and g differ. A subtree
// on one side only is named by its leaves, so that a field someone removed
// reads as that field, not as its parent.
func walk(path string, w, g any, out *[]string) {
	w, g = nilIfEmpty(w), nilIfEmpty(g)
	wm, wok := w.(map[string]any)
	gm, gok := g.(map[string]any)
	if wok || gok {
		if (wok || w == nil) && (gok || g == nil) {
			keys := slices.Sorted(maps.Keys(wm))
			for k := range gm {
				if _, ok := wm[k]; !ok {
					keys = append(keys, k)
				}
			}
			for _, k := range keys {
				walk(child(path, k), wm[k], gm[k], out)
			}
			return
		}
	}
	wl, wok := w.([]any)
	gl, gok := g.([]any)
	if (wok || w == nil) && (gok || g == nil) && (wok || gok) {
		for i := range max(len(wl), len(gl)) {
			walk(path+"["+strconv.Itoa(i)+"]", at(wl, i), at(gl, i), out)
		}
		return
	}
	if !reflect.DeepEqual(w, g) {
		*out = append(*out, leaf(path))
	}
}

// nilIfEmpty reads a map or list that holds nothing but empty values, at any
// depth, as no value, as the API server does for most fields: walk already
// reads a list's trailing empty items as missing, so [{}] is no list, and a
// map or list where the other side has a value of another type still differs
// only where it holds something.
func nilIfEmpty(v any) any {
	if empty(v) {
		return nil
	}
	return v
}

// empty reports whether v is nil, or a map or list of empty values only.
func empty(v any) bool {
	switch e := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, x := range e {
			if !empty(x) {
				return false
			}
		}
		return true
	case []any:
		for _, x := range e {
			if !empty(x) {
				return false
			}
		}
		return true
	}
	return false
}

func at(l []any, i int) any {
	if i < len(l) {
		return l[i]
	}
	return nil
}

// plainKey is a map key written after a dot; others are written in brackets:
// metadata.labels[app.kubernetes.io/name], data[tls.crt].
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func child(path, k string) string {
	switch {
	case !plainKey.MatchString(k):
		return path + "[" + k + "]"
	case path == "":
		return k
	}
	return path + "." + k
}

// leaf names the whole object for a difference at the top.
func leaf(path string) string {
	if path == "" {
		return "."
	}
	return path
}
