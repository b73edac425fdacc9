//go:build e2e

package crossplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// serverTLSSecret is the Secret the suite, as the External runtime, names in each revision's
// status.tlsServerSecretName.
const serverTLSSecret = "clusterops-external-tls"

// serverCerts writes to dir a server certificate for 127.0.0.1 signed by Crossplane's root CA
// (tls.crt, tls.key) and that CA (ca.crt), and stores the same in serverTLSSecret. Core dials
// functions over mTLS only: it trusts the root CA and presents a client certificate the same CA
// signed, which the function verifies with ca.crt.
func serverCerts(ctx context.Context, c client.Client, dir string) error {
	ca := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: crossplaneNamespace, Name: rootCASecret}, ca); err != nil {
		return fmt.Errorf("cannot read Crossplane's root CA: %w", err)
	}
	caPair, err := tls.X509KeyPair(ca.Data["tls.crt"], ca.Data["tls.key"])
	if err != nil {
		return fmt.Errorf("cannot parse Crossplane's root CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caPair.Certificate[0])
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "clusterops-e2e"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caPair.PrivateKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"ca.crt":  ca.Data["tls.crt"],
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			return err
		}
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: serverTLSSecret, Namespace: crossplaneNamespace}}
	_, err = controllerutil.CreateOrUpdate(ctx, c, s, func() error { s.Data = files; return nil })
	return err
}
