package conversion

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Keys of the serving Secret (type kubernetes.io/tls).
const (
	keyCert = "tls.crt"
	keyKey  = "tls.key"
	// keyCA is the CA bundle the CRD gets: the CA of the current serving
	// certificate, then the previous one while certificates it signed may
	// still be served.
	keyCA = "ca.crt"
)

// servingCert is a serving certificate, its key and the CA bundle that
// trusts it.
type servingCert struct {
	certPEM, keyPEM, caPEM []byte
	notBefore, notAfter    time.Time
}

// issue makes a new CA and a serving certificate it signs for dnsNames and
// ips, valid from now for validity; previousCA (PEM, may be empty) is kept
// in the bundle after the new CA.
func issue(now time.Time, validity time.Duration, dnsNames []string, ips []net.IP, previousCA []byte) (servingCert, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return servingCert{}, err
	}
	// Valid a little before now, for clocks behind this one.
	notBefore, notAfter := now.Add(-backdate(validity)), now.Add(validity)
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "inferencestack-conversion-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return servingCert{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return servingCert{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return servingCert{}, err
	}
	name := "inferencestack-conversion"
	if len(dnsNames) > 0 {
		name = dnsNames[0]
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return servingCert{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return servingCert{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if prev, ok := firstCert(previousCA); ok && prev.NotAfter.After(now) {
		caPEM = append(caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: prev.Raw})...)
	}
	return servingCert{
		certPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		caPEM:     caPEM,
		notBefore: notBefore,
		notAfter:  notAfter,
	}, nil
}

// parse reads a serving certificate from the Secret's data.
func parse(data map[string][]byte) (servingCert, error) {
	c := servingCert{certPEM: data[keyCert], keyPEM: data[keyKey], caPEM: data[keyCA]}
	if _, err := tls.X509KeyPair(c.certPEM, c.keyPEM); err != nil {
		return servingCert{}, fmt.Errorf("%s and %s: %w", keyCert, keyKey, err)
	}
	leaf, ok := firstCert(c.certPEM)
	if !ok {
		return servingCert{}, errors.New(keyCert + ": no certificate")
	}
	if _, ok := firstCert(c.caPEM); !ok {
		return servingCert{}, errors.New(keyCA + ": no certificate")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.caPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2)}); err != nil {
		return servingCert{}, fmt.Errorf("%s is not signed by %s: %w", keyCert, keyCA, err)
	}
	c.notBefore, c.notAfter = leaf.NotBefore, leaf.NotAfter
	return c, nil
}

// backdate is how long before its issue a certificate of validity is
// valid: a minute, or a tenth of a short validity.
func backdate(validity time.Duration) time.Duration {
	return min(time.Minute, validity/10)
}

// due says whether c must be renewed at now: in the last third of the
// validity it was issued with (or past it).
func (c servingCert) due(now time.Time) bool {
	full := c.notAfter.Sub(c.notBefore)
	issued := c.notBefore.Add(backdate(full * 10 / 11))
	return now.After(c.notAfter.Add(-c.notAfter.Sub(issued) / 3))
}

func (c servingCert) data() map[string][]byte {
	return map[string][]byte{keyCert: c.certPEM, keyKey: c.keyPEM, keyCA: c.caPEM}
}

func firstCert(data []byte) (*x509.Certificate, bool) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, false
		}
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			return c, err == nil
		}
	}
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
