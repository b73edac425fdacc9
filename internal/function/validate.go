package function

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A fieldError says what is wrong with one field of the XR, by its path.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return e.path + " " + e.msg }

func required(path string) error { return &fieldError{path: path, msg: "is required"} }

func invalid(path, format string, a ...any) error {
	return &fieldError{path: path, msg: fmt.Sprintf(format, a...)}
}

// namespaceName checks a namespace name.
func namespaceName(path, v string) error {
	if v == "" {
		return required(path)
	}
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		return invalid(path, "%q is not a namespace name: %s", v, strings.Join(errs, "; "))
	}
	return nil
}

// objectName checks the name of a ConfigMap, Secret or provider config.
func objectName(path, v string) error {
	if v == "" {
		return required(path)
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return invalid(path, "%q is not an object name: %s", v, strings.Join(errs, "; "))
	}
	return nil
}

// between checks an optional number against inclusive bounds.
func between(path string, v *int32, lo, hi int32) error {
	if v != nil && (*v < lo || *v > hi) {
		return invalid(path, "must be between %d and %d, got %d", lo, hi, *v)
	}
	return nil
}

// durationRE is the duration syntax the provider's CRDs accept: Go durations
// without signs or units below a millisecond.
var durationRE = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`)

// duration parses an optional duration of at least minimum. Empty is nil.
func duration(path, v string, minimum time.Duration) (*metav1.Duration, error) {
	if v == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || !durationRE.MatchString(v) {
		return nil, invalid(path, "%q is not a duration such as 30s, 5m or 1h30m", v)
	}
	if d < minimum {
		return nil, invalid(path, "must be at least %s, got %s", minimum, v)
	}
	// The composed value is written as d.String(), which shows a fraction of
	// a millisecond in µs or ns: units the provider's CRDs refuse.
	if d%time.Millisecond != 0 {
		return nil, invalid(path, "%q is not a whole number of milliseconds", v)
	}
	return &metav1.Duration{Duration: d}, nil
}

// labelSelector checks a label selector the way the API server will.
func labelSelector(path string, s *metav1.LabelSelector) error {
	if s == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return invalid(path, "is not a valid label selector: %v", err)
	}
	return nil
}
