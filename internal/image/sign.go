package image

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// The layout cosign reads for key-based signatures: an image tagged
// sha256-<hex>.sig beside the signed manifest, one layer per signature
// holding the simple-signing payload, the signature in an annotation.
const (
	// SimpleSigningMediaType is the media type of a signature layer: the
	// payload (sigstore's payload.Cosign) that the signature covers.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds the base64 signature over the layer's blob.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// signatureTagSuffix ends the tag of the signatures of a manifest.
	signatureTagSuffix = ".sig"
)

// SigningKeyEnv is the environment variable that may hold the release's
// private key (PEM) instead of a file.
const SigningKeyEnv = "BUNDLEGEN_SIGNING_KEY"

// Signer signs payloads. Key-based signing is KeySigner; a keyless signer
// (a Fulcio certificate, a Rekor entry) would return its certificate in the
// annotations of the signature layer.
type Signer interface {
	// Sign returns the signature over payload and the annotations its
	// signature layer carries besides SignatureAnnotation.
	Sign(ctx context.Context, payload []byte) (sig []byte, annotations map[string]string, err error)
}

// Verifier checks the signature layers Signer made.
type Verifier interface {
	// Verify checks sig over payload; annotations are the layer's.
	Verify(ctx context.Context, payload, sig []byte, annotations map[string]string) error
}

// GenerateKeyPair returns a new ECDSA P-256 private key (PKCS#8 PEM, as
// `bundlegen sign --key` reads it) and its public key (PKIX PEM, as
// `bundlegen verify --key` and `cosign verify --key` read it), as `openssl
// genpkey` and `openssl pkey -pubout` write them. The tests make their
// throwaway keys with it.
func GenerateKeyPair() (priv, pub []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

// KeySigner signs with a private key (ECDSA P-256 with SHA-256, as
// `cosign generate-key-pair` makes them).
type KeySigner struct {
	sv signature.SignerVerifier
}

// LoadKeySigner reads an unencrypted PKCS#8 or SEC 1 PEM private key; from
// names where it comes from (a file or SigningKeyEnv) for errors.
func LoadKeySigner(pemBytes []byte, from string) (*KeySigner, error) {
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, cryptoutils.SkipPassword)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w (want an unencrypted PEM private key, e.g. `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`)", from, err)
	}
	if _, ok := priv.(*ecdsa.PrivateKey); !ok {
		return nil, fmt.Errorf("signing key %s is a %T: want an ECDSA P-256 key", from, priv)
	}
	sv, err := signature.LoadSignerVerifier(priv, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", from, err)
	}
	return &KeySigner{sv: sv}, nil
}

// Sign implements Signer.
func (k *KeySigner) Sign(_ context.Context, p []byte) ([]byte, map[string]string, error) {
	sig, err := k.sv.SignMessage(bytes.NewReader(p))
	return sig, nil, err
}

// PublicKeyPEM returns the public key in PEM, as `bundlegen verify --key`
// and `cosign verify --key` read it.
func (k *KeySigner) PublicKeyPEM() ([]byte, error) {
	pub, err := k.sv.PublicKey()
	if err != nil {
		return nil, err
	}
	return cryptoutils.MarshalPublicKeyToPEM(pub)
}

// KeyVerifier checks signatures with a public key.
type KeyVerifier struct {
	v signature.Verifier
}

// LoadKeyVerifier reads a PEM public key; from names it for errors.
func LoadKeyVerifier(pemBytes []byte, from string) (*KeyVerifier, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w (want a PEM public key, such as cosign.pub)", from, err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", from, err)
	}
	return &KeyVerifier{v: v}, nil
}

// Verify implements Verifier.
func (k *KeyVerifier) Verify(_ context.Context, p, sig []byte, _ map[string]string) error {
	return k.v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(p))
}

// signaturePayload is the simple-signing payload cosign signs for the
// manifest d.
func signaturePayload(d name.Digest) ([]byte, error) {
	return payload.Cosign{Image: d}.MarshalJSON()
}

// checkPayload checks that a simple-signing payload is about the manifest d.
func checkPayload(p []byte, d name.Digest) error {
	var c payload.Cosign
	if err := c.UnmarshalJSON(p); err != nil {
		return err
	}
	if c.Image.DigestStr() != d.DigestStr() {
		return fmt.Errorf("the signed payload is about %s, not %s", c.Image.DigestStr(), d.DigestStr())
	}
	return nil
}

// signatureTag is the tag of the signatures of the manifest d.
func signatureTag(d name.Digest) (name.Tag, error) { return cosignTag(d, signatureTagSuffix) }

// cosignTag is the tag cosign gives what it attaches to the manifest d:
// <alg>-<hex><suffix>.
func cosignTag(d name.Digest, suffix string) (name.Tag, error) {
	alg, hex, ok := strings.Cut(d.DigestStr(), ":")
	if !ok {
		return name.Tag{}, fmt.Errorf("%s: not a digest", d)
	}
	return d.Context().Tag(alg + "-" + hex + suffix), nil
}

// encodeSig and decodeSig are the annotation's encoding.
func encodeSig(sig []byte) string { return base64.StdEncoding.EncodeToString(sig) }

func decodeSig(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("no " + SignatureAnnotation + " annotation")
	}
	return base64.StdEncoding.DecodeString(s)
}

// maxKeySize bounds a PEM key file: an ECDSA P-256 key in PEM is a few
// hundred bytes, so a larger file is not a key and is not read whole.
const maxKeySize = 64 << 10

// KeySignerFrom loads the signing key from file or, when file is empty,
// from the environment variable SigningKeyEnv (the PEM itself, for CI
// secrets).
func KeySignerFrom(file string) (*KeySigner, error) {
	if file != "" {
		b, err := atomicfs.ReadFileLimit(file, maxKeySize)
		if err != nil {
			return nil, fmt.Errorf("--key %s: %w", file, err)
		}
		return LoadKeySigner(b, file)
	}
	if v := os.Getenv(SigningKeyEnv); v != "" {
		return LoadKeySigner([]byte(v), "$"+SigningKeyEnv)
	}
	return nil, fmt.Errorf("no signing key: give --key FILE (an ECDSA P-256 PEM private key) or set %s to the key's PEM", SigningKeyEnv)
}

// KeyVerifierFrom loads a PEM public key from file.
func KeyVerifierFrom(file string) (*KeyVerifier, error) {
	if file == "" {
		return nil, errors.New("no public key: give --key FILE (the release's PEM public key, cosign.pub)")
	}
	b, err := atomicfs.ReadFileLimit(file, maxKeySize)
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", file, err)
	}
	return LoadKeyVerifier(b, file)
}
