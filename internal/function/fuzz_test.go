package function

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzDuration feeds the durations teams write in an XR: a duration the
// function accepts is at least the minimum, and the value it composes (a
// metav1.Duration, written as Duration.String()) is one the provider's CRDs
// accept too, so a composed managed resource is never refused for it.
func FuzzDuration(f *testing.F) {
	f.Add("30s", int64(0))
	f.Add("1h30m", int64(time.Second))
	f.Add("0.5s", int64(time.Second))
	f.Add("1.5ms", int64(0))
	f.Fuzz(func(t *testing.T, v string, minimum int64) {
		d, err := duration("spec.chaos.minPodAge", v, time.Duration(minimum))
		if err != nil || d == nil {
			return
		}
		if d.Duration < time.Duration(minimum) {
			t.Fatalf("duration(%q) = %s, below the minimum %s", v, d.Duration, time.Duration(minimum))
		}
		if s := d.Duration.String(); !durationRE.MatchString(s) {
			t.Fatalf("duration(%q) composes %q, which the provider's CRDs refuse", v, s)
		}
	})
}

// FuzzNames: a name the function accepts is one the API server accepts, and
// a label selector it accepts compiles.
func FuzzNames(f *testing.F) {
	f.Add("team-a", "app", "In", "web")
	f.Add("Team_A", "a/b/c", "Equals", "")
	f.Fuzz(func(t *testing.T, name, key, op, value string) {
		if namespaceName("spec.ns", name) == nil && len(validation.IsDNS1123Label(name)) > 0 {
			t.Fatalf("namespace name %q accepted", name)
		}
		if objectName("spec.name", name) == nil && len(validation.IsDNS1123Subdomain(name)) > 0 {
			t.Fatalf("object name %q accepted", name)
		}
		s := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOperator(op), Values: []string{value}}}}
		if labelSelector("spec.selector", s) == nil {
			if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
				t.Fatalf("selector %+v accepted: %v", s, err)
			}
		}
	})
}
