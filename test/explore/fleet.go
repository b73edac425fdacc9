package explore

import (
	"context"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/internal/provider"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// stopTimeout bounds how long a stopped replica may take to return.
const stopTimeout = 60 * time.Second

// A replica is the provider running in-process as one sharded replica.
type replica struct {
	id     string
	p      *provider.Provider
	cancel context.CancelFunc
	done   chan error
}

// A Fleet is a sequence's live replicas, in the order they started: an op's
// Replica indexes it.
type Fleet struct {
	// cfg is the provider's ServiceAccount's, bound to the RBAC this
	// repository ships (OpRevoke takes part of it away).
	cfg *rest.Config
	// prefix goes before every identity: runs of one seed in one API
	// server share no identity, so none takes a Lease an earlier run held.
	prefix   string
	replicas []*replica
	// requests, when set, records what every replica sends into the
	// world's namespaces.
	requests *requestLog
	// cut is the network between the replicas and the API server.
	cut *cut
}

// Start starts a replica named id, as a replica of its own would run:
// sharded over 4 shards on short Leases, with its own metrics registry.
func (f *Fleet) Start(id string) error {
	id = f.prefix + id
	cfg := rest.CopyConfig(f.cfg)
	if f.requests != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recording{next: rt, log: f.requests, replica: id} })
	}
	if f.cut != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cutTransport{next: rt, cut: f.cut} })
	}
	o := testenv.ProviderOptions(cfg, time.Hour, 50)
	o.Shards, o.Identity, o.SkipNameValidation = shards, id, true
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	o.MetricsRegistry = prometheus.NewRegistry()
	if path := os.Getenv("EXPLORE_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err == nil {
			zl := zap.New(zap.UseDevMode(true), zap.WriteTo(f), zap.ConsoleEncoder(func(c *zapcore.EncoderConfig) { c.EncodeTime = zapcore.RFC3339NanoTimeEncoder })).WithValues("replica", id)
			o.Logger = logging.NewLogrLogger(zl)
		}
	}
	p, err := provider.New(o)
	if err != nil {
		return errors.Wrapf(err, "cannot build replica %s", id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{id: id, p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Start(ctx) }()
	f.replicas = append(f.replicas, r)
	return nil
}

// Stop stops replica i and waits until it has returned.
func (f *Fleet) Stop(i int) error {
	if i < 0 || i >= len(f.replicas) {
		return errors.Errorf("no replica %d of %d", i, len(f.replicas))
	}
	r := f.replicas[i]
	f.replicas = append(f.replicas[:i], f.replicas[i+1:]...)
	r.cancel()
	select {
	case err := <-r.done:
		return errors.Wrapf(err, "replica %s stopped", r.id)
	case <-time.After(stopTimeout):
		return errors.Errorf("replica %s did not stop within %s", r.id, stopTimeout)
	}
}

// StopAll stops every replica.
func (f *Fleet) StopAll() error {
	var first error
	for len(f.replicas) > 0 {
		if err := f.Stop(0); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Caches are the live replicas' managers' caches: what each replica's
// reconciles read their configs from.
func (f *Fleet) Caches() []client.Reader {
	out := make([]client.Reader, 0, len(f.replicas))
	for _, r := range f.replicas {
		out = append(out, r.p.Manager.GetCache())
	}
	return out
}

// IDs are the live replicas' identities.
func (f *Fleet) IDs() []string {
	out := make([]string, 0, len(f.replicas))
	for _, r := range f.replicas {
		out = append(out, r.id)
	}
	return out
}
