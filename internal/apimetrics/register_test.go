package apimetrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// counter is a collector of a concrete type, as the provider's are.
type counter struct{ prometheus.Counter }

// wrapped is a collector of the same metrics as the one it wraps, of another type.
type wrapped struct{ prometheus.Collector }

func TestExistingRegistersOrReturnsTheRegistered(t *testing.T) {
	opts := prometheus.CounterOpts{Name: "clusterops_test_total", Help: "A test counter."}
	first := &counter{prometheus.NewCounter(opts)}
	type want struct {
		same bool // the collector returned is first
		err  bool
	}
	cases := map[string]struct {
		reason  string
		already []prometheus.Collector
		c       *counter
		want    want
	}{
		"New": {
			reason: "A collector nobody registered is registered and returned.",
			c:      first,
			want:   want{same: true},
		},
		"AlreadyRegistered": {
			reason:  "The metrics of a provider built earlier in the process are shared, not a panic or an error.",
			already: []prometheus.Collector{first},
			c:       &counter{prometheus.NewCounter(opts)},
			want:    want{same: true},
		},
		"HeldByAnotherType": {
			reason:  "A collector of another type holding the same metrics cannot be used in its place: an error.",
			already: []prometheus.Collector{wrapped{first.Counter}},
			c:       first,
			want:    want{err: true},
		},
		"Conflicting": {
			reason:  "Metrics of the same name that differ are an error.",
			already: []prometheus.Collector{prometheus.NewCounter(prometheus.CounterOpts{Name: opts.Name, Help: "Another help."})},
			c:       first,
			want:    want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			for _, c := range tc.already {
				reg.MustRegister(c)
			}
			got, err := Existing(reg, tc.c)
			g := want{same: got == first, err: err != nil}
			if diff := cmp.Diff(tc.want, g, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nExisting(...): -want, +got:\n%s\nerr: %v", tc.reason, diff, err)
			}
		})
	}
}
