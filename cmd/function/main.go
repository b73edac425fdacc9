// Command function runs function-clusterops, the Crossplane composition
// function behind the Tenant and WebApp platform APIs, as a gRPC server.
//
// Crossplane's Deployment runtime starts it without arguments and with
// TLS_SERVER_CERTS_DIR set, so the defaults serve mTLS on :9443.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/crossplane/function-sdk-go"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	fn "github.com/clusterops/provider-clusterops/internal/function"
	"github.com/clusterops/provider-clusterops/internal/version"
)

type options struct {
	address     string
	tlsCertsDir string
	insecure    bool
	debug       bool
	metricsAddr string
}

func parse(args []string) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("function", flag.ContinueOnError)
	fs.StringVar(&o.address, "address", ":9443", "Address to serve gRPC on.")
	fs.StringVar(&o.tlsCertsDir, "tls-certs-dir", os.Getenv("TLS_SERVER_CERTS_DIR"), "Directory with the server's tls.crt and tls.key and the ca.crt that client certificates must chain to (mTLS). Defaults to $TLS_SERVER_CERTS_DIR, which Crossplane sets.")
	fs.BoolVar(&o.insecure, "insecure", false, "Serve plain gRPC without TLS, for local use such as crossplane render; --tls-certs-dir is ignored.")
	fs.BoolVar(&o.debug, "debug", false, "Log at debug level.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, errors.Errorf("unexpected arguments: %v", fs.Args())
	}
	if !o.insecure && o.tlsCertsDir == "" {
		return o, errors.New("no credentials: set --tls-certs-dir (or TLS_SERVER_CERTS_DIR) to a directory with tls.crt, tls.key and ca.crt, or pass --insecure for local use")
	}
	if o.insecure {
		o.tlsCertsDir = ""
	}
	if o.metricsAddr == "0" {
		o.metricsAddr = ""
	}
	return o, nil
}

func main() {
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "function:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "function:", err)
		os.Exit(1)
	}
}

// run serves the function until the server fails.
func run(o options) error {
	log, err := function.NewLogger(o.debug)
	if err != nil {
		return err
	}
	log.Info("Starting", "version", version.Version, "address", o.address, "mtls", !o.insecure)
	return function.Serve(fn.New(log),
		function.Listen("tcp", o.address),
		function.MTLSCertificates(o.tlsCertsDir),
		function.Insecure(o.insecure),
		function.WithMetricsServer(o.metricsAddr))
}
