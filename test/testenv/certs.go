package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// ServingCert is a serving certificate and its key, and the CA that signed
// it, in PEM.
type ServingCert struct {
	CA, Cert, Key []byte
}

// NewServingCert makes a CA named caName and, signed by it, a serving
// certificate for hosts (IP addresses and DNS names; the first is also its
// common name), valid from an hour ago for a week.
func NewServingCert(caName string, hosts []string) (ServingCert, error) {
	return newCert(caName, hosts, x509.ExtKeyUsageServerAuth)
}

// NewClientCert makes a CA named caName and, signed by it, a client
// certificate (for mutual TLS) whose common name is name.
func NewClientCert(caName, name string) (ServingCert, error) {
	return newCert(caName, []string{name}, x509.ExtKeyUsageClientAuth)
}

func newCert(caName string, hosts []string, usage x509.ExtKeyUsage) (ServingCert, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return ServingCert{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: caName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return ServingCert{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return ServingCert{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if len(hosts) > 0 {
		tmpl.Subject = pkix.Name{CommonName: hosts[0]}
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return ServingCert{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return ServingCert{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return ServingCert{}, err
	}
	return ServingCert{
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}
