package testenv

import (
	"bytes"
	"context"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// StopAPIServer stops the API server and leaves it stopped (etcd and its data
// stay), so a test can watch what clients do while a cluster is down;
// StartAPIServer brings it back on the same port and certificate. The Env
// must have been started with Options.Restartable.
func (e *Env) StopAPIServer() error {
	if e.certDir == "" {
		return errors.New("the API server is not restartable: start the Env with Options.Restartable")
	}
	return errors.Wrap(e.env.ControlPlane.GetAPIServer().Stop(), "cannot stop the API server")
}

// StartAPIServer starts the API server StopAPIServer stopped.
func (e *Env) StartAPIServer() error {
	if e.certDir == "" {
		return errors.New("the API server is not restartable: start the Env with Options.Restartable")
	}
	return errors.Wrap(e.env.ControlPlane.GetAPIServer().Start(), "cannot start the API server")
}

// Watches are the watches the API server serves now
// (apiserver_longrunning_requests of verb WATCH) by resource and group, read
// as its admin.
func (e *Env) Watches(ctx context.Context) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, errors.Wrap(err, "cannot build a client of the API server")
	}
	b, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, errors.Wrap(err, "cannot read the API server's metrics")
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, errors.Wrap(err, "cannot parse the API server's metrics")
	}
	out := map[string]float64{}
	for _, m := range fams["apiserver_longrunning_requests"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["verb"] == "WATCH" && m.GetGauge().GetValue() > 0 {
			out[strings.TrimSuffix(l["resource"]+"."+l["group"], ".")] += m.GetGauge().GetValue()
		}
	}
	return out, nil
}
