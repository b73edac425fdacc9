package drift

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/fake"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

func TestFieldsListsOnlyTheFieldsThatDiffer(t *testing.T) {
	pod := func(image string, env ...string) corev1.PodSpec {
		c := corev1.Container{Name: "app", Image: image}
		for _, e := range env {
			c.Env = append(c.Env, corev1.EnvVar{Name: e, Value: "v"})
		}
		return corev1.PodSpec{Containers: []corev1.Container{c}}
	}
	cases := map[string]struct {
		reason    string
		want, got any
		fields    []string
	}{
		"Same": {
			reason: "Equal objects have no differing field.",
			want:   pod("nginx:1"), got: pod("nginx:1"),
		},
		"Image": {
			reason: "A changed leaf is named by its path, with list indexes.",
			want:   pod("nginx:1"), got: pod("nginx:2"),
			fields: []string{"containers[0].image"},
		},
		"Removed": {
			reason: "A subtree another writer removed is named by its leaves.",
			want:   pod("nginx:1", "A", "B"), got: pod("nginx:1"),
			fields: []string{"containers[0].env[0].name", "containers[0].env[0].value", "containers[0].env[1].name", "containers[0].env[1].value"},
		},
		"Added": {
			reason: "A field only the live object has differs too.",
			want:   map[string]any{"a": 1}, got: map[string]any{"a": 1, "b": map[string]any{"c": true}},
			fields: []string{"b.c"},
		},
		"Keys": {
			reason: "Keys that are not plain names are written in brackets; values never appear.",
			want:   map[string]any{"data": map[string]string{"tls.crt": "secret-one", "plain": "x"}, "metadata": map[string]any{"labels": map[string]string{"app.kubernetes.io/name": "a"}}},
			got:    map[string]any{"data": map[string]string{"tls.crt": "secret-two", "plain": "x"}, "metadata": map[string]any{"labels": map[string]string{"app.kubernetes.io/name": "b"}}},
			fields: []string{"data[tls.crt]", "metadata.labels[app.kubernetes.io/name]"},
		},
		"Shape": {
			reason: "A map where a scalar was is one difference, at its path.",
			want:   map[string]any{"a": map[string]any{"b": 1}}, got: map[string]any{"a": "x"},
			fields: []string{"a"},
		},
		"Top": {
			reason: "Scalars that differ at the top are the whole object.",
			want:   1, got: 2,
			fields: []string{"."},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Fields(tc.want, tc.got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.fields, got); diff != "" {
				t.Errorf("%s\nFields(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzFields checks on any two JSON documents that Fields finds no
// difference exactly when they are equal, and names no value of either.
func FuzzFields(f *testing.F) {
	f.Add(`{"a":{"b":[1,2]}}`, `{"a":{"b":[1]}}`)
	f.Add(`{"data":{"k.x":"secretvalue"}}`, `{"data":{"k.x":"othervalue"}}`)
	f.Add(`[1,{"a":null}]`, `{"a":[]}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		var w, g any
		if json.Unmarshal([]byte(a), &w) != nil || json.Unmarshal([]byte(b), &g) != nil {
			return
		}
		fields, err := Fields(w, g)
		if err != nil {
			t.Fatal(err)
		}
		// Fields reads a missing field, null, and an empty map or list alike.
		if same := cmp.Equal(normal(w), normal(g)); same != (len(fields) == 0) {
			t.Fatalf("equal %t but fields %q", same, fields)
		}
		// Field names may be named; values never. A marker that is a value
		// and in no key must not appear in any path.
		keys := strings.Join(append(keysOf(w), keysOf(g)...), " ")
		for _, v := range []string{"secretvalue", "othervalue"} {
			if strings.Contains(a+b, `"`+v+`"`) && !strings.Contains(keys, v) && strings.Contains(strings.Join(fields, " "), v) {
				t.Fatalf("a value is named in %q", fields)
			}
		}
	})
}

// keysOf lists every map key in v, at any depth.
func keysOf(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			out = append(out, k)
			out = append(out, keysOf(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, keysOf(e)...)
		}
	}
	return out
}

// normal is v with nulls, empty maps and lists, and the nulls that end a
// list left out.
func normal(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if n := normal(e); n != nil {
				out[k] = n
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normal(e)
		}
		for len(out) > 0 && out[len(out)-1] == nil {
			out = out[:len(out)-1]
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}

func TestRepairedRecordsEventCounterAndRecent(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := NewReporter(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	mg := &fake.Managed{}
	var recent []v1alpha1.Drift
	now := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	for i := range v1alpha1.MaxRecentDrift + 2 {
		r.Repaired(rec, mg, "DriftTest", &recent, Of("ConfigMap", "apps", "c"+string(rune('0'+i)), []string{"data[a]"}), now)
	}
	if len(recent) != v1alpha1.MaxRecentDrift || recent[0].Name != "c6" || recent[4].Name != "c2" {
		t.Errorf("recent keeps the newest %d first, got %v", v1alpha1.MaxRecentDrift, recent)
	}
	r.RepairedMore(rec, mg, "DriftTest", 3)
	if got := testutil.ToFloat64(r.repaired.WithLabelValues("DriftTest")); got != 10 {
		t.Errorf("counted %v, want 10", got)
	}
	want := event.Event{Type: event.TypeNormal, Reason: ReasonRepaired, Message: "3 more objects changed by other writers repaired", Annotations: map[string]string{}}
	if diff := cmp.Diff(want, rec.last); diff != "" {
		t.Errorf("event: -want, +got:\n%s", diff)
	}
	if recent[0].Time != metav1.NewTime(now) {
		t.Errorf("time %v, want %v", recent[0].Time, now)
	}
}

func TestMessageNamesTheObjectAndItsFields(t *testing.T) {
	many := make([]string, 12)
	for i := range many {
		many[i] = "f" + string(rune('a'+i))
	}
	cases := map[string]struct {
		d    v1alpha1.Drift
		want string
	}{
		"Deleted": {d: Deleted("Deployment", "apps", "web"), want: "Deployment apps/web was deleted by another writer; made again"},
		"More":    {d: Of("Service", "", "web", many), want: "Service \"web\" changed by another writer at fa, fb, fc, fd, fe, ff, fg, fh, fi, fj and 2 more; repaired"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Message(tc.d); got != tc.want {
				t.Errorf("Message: got %q, want %q", got, tc.want)
			}
		})
	}
}

type recorder struct{ last event.Event }

func (r *recorder) Event(_ runtime.Object, e event.Event)    { r.last = e }
func (r *recorder) WithAnnotations(...string) event.Recorder { return r }

// Reporters built from one registry share its counter, so that the
// providers of one process register it once; a nil Reporter records the
// event and the status and counts nothing.
func TestReportersShareTheirRegistrysCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewReporter(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewReporter(reg)
	if err != nil {
		t.Fatalf("second reporter on the same registry: %v", err)
	}
	mg := &fake.Managed{}
	var recent []v1alpha1.Drift
	d := Deleted("Pod", "apps", "p")
	a.Repaired(&recorder{}, mg, "DriftTest", &recent, d, time.Now())
	b.Repaired(&recorder{}, mg, "DriftTest", &recent, d, time.Now())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP clusterops_drift_repaired_total Objects another writer changed or deleted that the provider repaired, by the kind of managed resource that keeps them (AppBundle, CopyRule, ImmortalContainer).
# TYPE clusterops_drift_repaired_total counter
clusterops_drift_repaired_total{kind="DriftTest"} 2
`), "clusterops_drift_repaired_total"); err != nil {
		t.Error(err)
	}
	rec := &recorder{}
	var none *Reporter
	none.Repaired(rec, mg, "DriftTest", &recent, d, time.Now())
	if rec.last.Reason != ReasonRepaired || len(recent) != 3 {
		t.Errorf("a nil Reporter: event %v, %d recent; want %s and 3", rec.last, len(recent), ReasonRepaired)
	}
}
