package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

func TestParseServesMTLSUnderCrossplane(t *testing.T) {
	cases := map[string]struct {
		reason  string
		env     string
		args    []string
		want    options
		wantErr string
	}{
		"CrossplaneRuntime": {
			reason: "Crossplane's Deployment runtime passes no arguments and sets TLS_SERVER_CERTS_DIR: serve mTLS on :9443.",
			env:    "/tls/server",
			want:   options{address: ":9443", tlsCertsDir: "/tls/server", metricsAddr: ":8080"},
		},
		"Insecure": {
			reason: "--insecure serves plain gRPC and ignores the certificates.",
			env:    "/tls/server",
			args:   []string{"--insecure", "--address=127.0.0.1:9443", "--debug", "--metrics-bind-address=0"},
			want:   options{address: "127.0.0.1:9443", insecure: true, debug: true},
		},
		"CertsDirFlag": {
			reason: "--tls-certs-dir overrides the environment.",
			env:    "/tls/server",
			args:   []string{"--tls-certs-dir=/etc/fn"},
			want:   options{address: ":9443", tlsCertsDir: "/etc/fn", metricsAddr: ":8080"},
		},
		"NoCredentials": {
			reason:  "Without certificates or --insecure there is nothing to serve with.",
			wantErr: "no credentials: set --tls-certs-dir (or TLS_SERVER_CERTS_DIR)",
		},
		"StrayArgument": {
			reason:  "Arguments are refused rather than ignored.",
			args:    []string{"--insecure", "serve"},
			wantErr: "unexpected arguments: [serve]",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("TLS_SERVER_CERTS_DIR", tc.env)
			got, err := parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("\n%s\nparse(%v): got error %v, want one containing %q", tc.reason, tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("\n%s\nparse(%v): %v", tc.reason, tc.args, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(options{})); diff != "" {
				t.Errorf("\n%s\nparse(%v): -want, +got:\n%s", tc.reason, tc.args, diff)
			}
		})
	}
}

// TestServeAnswersOverGRPCAndMTLS runs the real server in-process, as the binary does, and calls
// RunFunction through a gRPC client: over plain gRPC with --insecure, and
// over mTLS with certificates laid out as Crossplane mounts them.
func TestServeAnswersOverGRPCAndMTLS(t *testing.T) {
	certs := newCerts(t)

	cases := map[string]struct {
		reason string
		opts   func(addr string) options
		creds  credentials.TransportCredentials
	}{
		"Insecure": {
			reason: "--insecure serves plain gRPC, for crossplane render and local runs.",
			opts: func(addr string) options {
				return options{address: addr, insecure: true}
			},
			creds: insecure.NewCredentials(),
		},
		"MutualTLS": {
			reason: "With a certificates directory the server speaks mTLS to clients whose certificate chains to ca.crt, as Crossplane's is.",
			opts: func(addr string) options {
				return options{address: addr, tlsCertsDir: certs.serverDir}
			},
			creds: credentials.NewTLS(certs.client),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			addr := freeAddress(t)
			go func() {
				// Serve returns only when it fails; the test reports that
				// through the calls below.
				if err := run(tc.opts(addr)); err != nil {
					t.Logf("run: %v", err)
				}
			}()

			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			rsp := callUntilServing(t, fnv1.NewFunctionRunnerServiceClient(conn))

			if got := rsp.GetResults(); len(got) != 0 {
				t.Errorf("\n%s\nRunFunction(...): unexpected results %v", tc.reason, got)
			}
			app := rsp.GetDesired().GetResources()["app"].GetResource().AsMap()
			if app["kind"] != "AppBundle" {
				t.Errorf("\n%s\nRunFunction(...): desired resource app is %v, want an AppBundle", tc.reason, app)
			}
		})
	}

	t.Run("ClientWithoutCertificate", func(t *testing.T) {
		addr := freeAddress(t)
		go func() { _ = run(options{address: addr, tlsCertsDir: certs.serverDir}) }()
		waitListening(t, addr)
		noCert := certs.client.Clone()
		noCert.Certificates = nil
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(noCert)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := fnv1.NewFunctionRunnerServiceClient(conn).RunFunction(ctx, webAppRequest()); err == nil {
			t.Error("RunFunction(...) without a client certificate succeeded, want the mTLS handshake refused")
		}
	})
}

func webAppRequest() *fnv1.RunFunctionRequest {
	return &fnv1.RunFunctionRequest{
		Meta: &fnv1.RequestMeta{Tag: "serve"},
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: resource.MustStructJSON(`{
			"apiVersion": "namespaced.platform.clusterops.io/v1alpha1",
			"kind": "WebApp",
			"metadata": {"name": "hello", "namespace": "tenant-beta"},
			"spec": {"image": "nginx:1.27"}
		}`)}},
	}
}

// callUntilServing calls RunFunction until the server, started in the
// background, answers.
func callUntilServing(t *testing.T, c fnv1.FunctionRunnerServiceClient) *fnv1.RunFunctionResponse {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rsp, err := c.RunFunction(ctx, webAppRequest(), grpc.WaitForReady(true))
		cancel()
		if err == nil {
			return rsp
		}
		if time.Now().After(deadline) {
			t.Fatalf("RunFunction(...): %v", err)
		}
	}
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server at %s never listened: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeAddress returns a loopback address with a port that was free a moment
// ago: function.Serve listens itself and does not tell which port :0 chose.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

type testCerts struct {
	serverDir string
	client    *tls.Config
}

// newCerts makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, and writes the server's side as Crossplane mounts it:
// tls.crt, tls.key and ca.crt in one directory.
func newCerts(t *testing.T) testCerts {
	t.Helper()
	caKey, caCert, caDER := issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil)
	serverKey, _, serverDER := issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "function-clusterops"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, caKey)
	clientKey, _, clientDER := issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "crossplane"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, caKey)

	dir := t.TempDir()
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.crt", "CERTIFICATE", caDER)
	write("tls.crt", "CERTIFICATE", serverDER)
	write("tls.key", "EC PRIVATE KEY", marshalKey(t, serverKey))

	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return testCerts{
		serverDir: dir,
		client: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			RootCAs:      pool,
			Certificates: []tls.Certificate{{Certificate: [][]byte{clientDER}, PrivateKey: clientKey}},
		},
	}
}

func issue(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, c, der
}

func marshalKey(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
