package serverstatus

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tlsMaterial is what verifies one server and what the operator presents
// to it.
type tlsMaterial struct {
	roots *x509.CertPool
	// leaf is the certificate of the server's Secret (DER).
	leaf []byte
	// client is the certificate presented with mutual TLS.
	client *tls.Certificate
}

// loadTLS reads the stack's TLS Secrets from the API server.
func (p *Prober) loadTLS(ctx context.Context, t Target) (*tlsMaterial, error) {
	sec := &corev1.Secret{}
	if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: t.Stack.Namespace, Name: t.TLS.SecretName}, sec); err != nil {
		return nil, fmt.Errorf("reading the server's TLS Secret %s: %w", t.TLS.SecretName, err)
	}
	m := &tlsMaterial{roots: x509.NewCertPool()}
	for _, key := range []string{corev1.TLSCertKey, "ca.crt"} {
		rest := sec.Data[key]
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("the server's TLS Secret %s, key %s: %w", t.TLS.SecretName, key, err)
			}
			if key == corev1.TLSCertKey && m.leaf == nil {
				m.leaf = cert.Raw
			}
			m.roots.AddCert(cert)
		}
	}
	if m.leaf == nil {
		return nil, fmt.Errorf("the server's TLS Secret %s holds no certificate in %s", t.TLS.SecretName, corev1.TLSCertKey)
	}
	if name := t.TLS.ClientSecretName; name != "" {
		cs := &corev1.Secret{}
		if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: t.Stack.Namespace, Name: name}, cs); err != nil {
			return nil, fmt.Errorf("reading the client certificate Secret %s: %w", name, err)
		}
		cert, err := tls.X509KeyPair(cs.Data[corev1.TLSCertKey], cs.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return nil, fmt.Errorf("the client certificate Secret %s: %w", name, err)
		}
		m.client = &cert
	}
	return m, nil
}

// config verifies the server's certificate against the stack's Secret: a
// chain to its tls.crt or ca.crt valid for the Service's name, or exactly
// the Secret's certificate (the server proves it holds that Secret's key,
// whatever names the certificate carries).
func (m *tlsMaterial) config(host string) *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: host,
		// VerifyConnection below verifies the server; the default check
		// alone would refuse a certificate the Secret pins but that names
		// another host.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server presented no certificate")
			}
			leaf := cs.PeerCertificates[0]
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := leaf.Verify(x509.VerifyOptions{Roots: m.roots, Intermediates: inter, DNSName: host})
			if err != nil && !bytes.Equal(leaf.Raw, m.leaf) {
				return fmt.Errorf("the server's certificate (sha256 %s) is not the stack's TLS Secret's and does not verify against it: %w",
					fingerprint(leaf.Raw), err)
			}
			return nil
		},
	}
	if m.client != nil {
		c.Certificates = []tls.Certificate{*m.client}
	}
	return c
}
