package target

import "time"

// WithSecretRecheck sets how long a kubeconfig-based client is reused before
// its Secret is read again: tests read it again at once.
func WithSecretRecheck(d time.Duration) Option { return func(r *Resolver) { r.recheck = d } }
