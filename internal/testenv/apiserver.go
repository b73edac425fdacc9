package testenv

import "github.com/crossplane/crossplane-runtime/v2/pkg/errors"

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
