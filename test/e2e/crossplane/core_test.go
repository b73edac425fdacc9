//go:build e2e

package crossplane

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	crossplaneNamespace = "crossplane-system"
	rootCASecret        = "crossplane-root-ca"
	clientTLSSecret     = "crossplane-tls-client"
)

// core is Crossplane core, run out of cluster as the documented recipe says
// (../shared/CONTROL-PLANE-NOTES.md): `core init` once, then `core start`.
type core struct {
	bin, crds, dir, logs, kubeconfig string
	c                                client.Client
	proc                             *process
}

// init creates what core expects to exist in a cluster and runs `core init`, which installs its
// CRDs and CA. Its first run can race CRD discovery, hence the retries.
func (x *core) init(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: crossplaneNamespace}}
	if err := x.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "crossplane", Namespace: crossplaneNamespace}}
	if err := x.c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	args := []string{"core", "init", "--enable-webhooks=false", "--cr-ds-path=" + x.crds,
		"--tlsca-secret-name=" + rootCASecret, "--tls-client-secret-name=" + clientTLSSecret,
		// No --activation: the provider's kinds stay inactive until a
		// ManagedResourceActivationPolicy names them, as in a cluster whose
		// operators choose what to offer.
		"--tls-server-secret-name=crossplane-tls-server"}
	var err error
	for range 5 {
		if err = runEnv(x.dir, []string{"KUBECONFIG=" + x.kubeconfig}, x.bin, args...); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("crossplane core init: %w", err)
}

// start runs `core start` with the given package runtimes (e.g. "Function=External;Provider=External")
// and waits until it is ready.
func (x *core) start(ctx context.Context, runtimes string) error {
	certs, cache := filepath.Join(x.dir, "client-certs"), filepath.Join(x.dir, "xpkg-cache")
	// Core writes each package it pulls into its cache; without the directory every pull fails
	// with a bare "read/write on closed pipe".
	for _, d := range []string{certs, cache} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	s := &corev1.Secret{}
	if err := x.c.Get(ctx, types.NamespacedName{Namespace: crossplaneNamespace, Name: clientTLSSecret}, s); err != nil {
		return err
	}
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(certs, k), s.Data[k], 0o600); err != nil {
			return err
		}
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	args := []string{"core", "start", "--debug", "--enable-webhooks=false",
		"--xpkg-cache-dir=" + cache,
		"--tls-client-certs-dir=" + certs, "--tls-client-secret-name=" + clientTLSSecret,
		"--package-runtime=" + runtimes,
		"--metrics-port=" + strconv.Itoa(metrics), "--health-probe-port=" + strconv.Itoa(health),
		// Claims and XRs are checked on watch events; the poll is the safety net only.
		"--poll-interval=1m"}
	if x.proc, err = start(x.logs, "crossplane", x.bin, args, "KUBECONFIG="+x.kubeconfig); err != nil {
		return err
	}
	return waitFor(ctx, time.Minute, "crossplane core ready", func(ctx context.Context) (bool, error) {
		if !x.proc.running() {
			return false, fmt.Errorf("crossplane core exited; see %s", filepath.Join(x.logs, "crossplane.log"))
		}
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", health)), nil
	})
}

func (x *core) stop() { x.proc.stop() }

// httpOK reports whether GET url answers 200.
func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
