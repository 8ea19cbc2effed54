package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// configureServing makes the API server listen on opts.ServingAddress and,
// when opts.ServingHosts is set, serve a certificate for them signed by a CA
// made here: envtest's own certificate names only localhost and the listen
// address, which pods reaching the API server through the `kubernetes`
// Service would refuse.
func (e *Env) configureServing(s *envtest.APIServer, opts Options) error {
	if opts.ServingAddress == "" && len(opts.ServingHosts) == 0 {
		return nil
	}
	address := opts.ServingAddress
	if address == "" {
		address = "127.0.0.1"
	}
	if net.ParseIP(address) == nil {
		return fmt.Errorf("testenv: ServingAddress %q is not an IP address", address)
	}
	// envtest picks a free port on 127.0.0.1 only, so pick it here.
	l, err := net.Listen("tcp", net.JoinHostPort(address, "0"))
	if err != nil {
		return fmt.Errorf("testenv: ServingAddress %s: %w (is it an address of this machine?)", address, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return err
	}
	// SecureServing's listen address.
	s.Address = address
	s.Port = strconv.Itoa(port)
	s.Configure().Set("advertise-address", address)
	if len(opts.ServingHosts) == 0 {
		return nil
	}

	// envtest keeps certificates it finds in CertDir (apiserver.* for
	// serving, sa-signer.* for service account tokens) and trusts
	// SecureServing.CA.
	dir := filepath.Join(e.dir, "apiserver")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	hosts := slices.Concat([]string{"localhost", "127.0.0.1", address}, opts.ServingHosts)
	ca, err := writeServingCerts(dir, hosts)
	if err != nil {
		return fmt.Errorf("testenv: making the API server's certificates: %w", err)
	}
	s.CertDir = dir
	s.CA = ca // SecureServing's CA, which Config trusts
	return nil
}

// writeServingCerts writes into dir a serving certificate for hosts
// (apiserver.crt, apiserver.key) signed by a new CA, and a service account
// signing key pair (sa-signer.crt, sa-signer.key); it returns the CA in PEM.
func writeServingCerts(dir string, hosts []string) ([]byte, error) {
	serving, err := NewServingCert("testenv API server CA", hosts)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "testenv service account signer"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	saDER, err := x509.CreateCertificate(rand.Reader, saTmpl, saTmpl, &saKey.PublicKey, saKey)
	if err != nil {
		return nil, err
	}
	saKeyDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"apiserver.crt": serving.Cert,
		"apiserver.key": serving.Key,
		"sa-signer.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: saDER}),
		"sa-signer.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saKeyDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return serving.CA, nil
}
