package apimetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Existing registers c with reg, or returns the collector of the same
// metrics already registered there: a test process builds several
// providers, a sharded replica builds its lead manager again, and
// controller-runtime's registry is global.
func Existing[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	var none C
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	are := prometheus.AlreadyRegisteredError{}
	if !errors.As(err, &are) {
		return none, err
	}
	existing, ok := are.ExistingCollector.(C)
	if !ok {
		return none, errors.Errorf("another collector, of type %T, holds the metrics", are.ExistingCollector)
	}
	return existing, nil
}
