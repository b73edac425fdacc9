package managedkind

import (
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	changelogsv1alpha1 "github.com/crossplane/crossplane-runtime/v2/apis/changelogs/proto/v1alpha1"
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
)

// ChangeLogs returns the options that make every kind's managed reconciler
// send each create, update and delete it performs to crossplane-runtime's
// change-log gRPC service on the unix socket at socketPath (where Crossplane's
// changelogs sidecar listens), naming provider as the entries' provider. Setup
// uses them when controller.Options also enable feature.EnableAlphaChangeLogs.
//
// The connection is made on first use and re-made as needed: a service that
// is not up yet delays each entry up to crossplane-runtime's send timeout
// (10s), after which the entry is dropped and the failure logged; the
// operation itself goes ahead. closeConn closes the connection.
func ChangeLogs(socketPath, provider string) (opts *controller.ChangeLogOptions, closeConn func() error, err error) {
	abs, err := filepath.Abs(socketPath)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "cannot resolve change-log socket path %q", socketPath)
	}
	// A local unix socket shared with the sidecar: no transport security, as
	// crossplane-runtime's providers do.
	conn, err := grpc.NewClient("unix://"+abs, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, errors.Wrapf(err, "cannot make a change-log client for socket %q", abs)
	}
	l := managed.NewGRPCChangeLogger(changelogsv1alpha1.NewChangeLogServiceClient(conn), managed.WithProviderVersion(provider))
	return &controller.ChangeLogOptions{ChangeLogger: l}, conn.Close, nil
}
