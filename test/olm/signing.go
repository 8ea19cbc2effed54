package olm

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/cosignverify"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// Signing is the release key of a test run, made for it and thrown away
// with it (the release's own key never reaches a test), and the commit the
// images are signed as built from: the repository's HEAD.
type Signing struct {
	Signer   *image.KeySigner
	Verifier *image.KeyVerifier
	// PublicKey is the verifier's key in PEM, as cosign reads it.
	PublicKey []byte
	Source    image.Source
}

// NewSigning makes a throwaway ECDSA P-256 key, as `bundlegen sign --key`
// reads one, and reads HEAD's commit and time from git.
func NewSigning() (*Signing, error) {
	priv, pub, err := image.GenerateKeyPair()
	if err != nil {
		return nil, err
	}
	signer, err := image.LoadKeySigner(priv, "(the test run's throwaway key)")
	if err != nil {
		return nil, err
	}
	verifier, err := image.LoadKeyVerifier(pub, "(the test run's throwaway key)")
	if err != nil {
		return nil, err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("git", "-C", root, "show", "-s", "--format=%H %cI", "HEAD").Output()
	if err != nil {
		return nil, fmt.Errorf("test/olm: reading HEAD's commit with git (the images are signed as built from it): %w", err)
	}
	commit, when, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	t, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return nil, fmt.Errorf("test/olm: HEAD's commit time %q: %w", when, err)
	}
	return &Signing{Signer: signer, Verifier: verifier, PublicKey: pub,
		Source: image.Source{Repository: "https://github.com/inferencestack/inferencestack", Commit: commit, Time: t}}, nil
}

// Sign attaches the SBOM and provenance of the pushed image ref (built by
// kind from input) and signs the three, as `bundlegen sign` does.
func (s *Signing) Sign(ctx context.Context, kind image.Kind, input, ref string) error {
	_, err := image.Sign{Kind: kind, Input: input, Image: ref, Source: s.Source, Signer: s.Signer,
		Command: []string{"bundlegen", "image", string(kind), input}}.Run(ctx)
	if err != nil {
		return fmt.Errorf("test/olm: signing %s: %w", ref, err)
	}
	return nil
}

// Verify checks the image ref as an admission policy would before anything
// pulls it: signed by the run's key, its SBOM and provenance attached and
// signed, the provenance naming the run's commit (`bundlegen verify`); and
// with cosign's own library, as sigstore policy-controller and Kyverno do:
// the signature (`cosign verify --key`) and an SPDX and an SLSA provenance
// v1 attestation (`cosign verify-attestation --type spdxjson|slsaprovenance1`).
// Both must accept it, so they agree on every image the tests push.
func (s *Signing) Verify(ctx context.Context, ref string) error {
	_, err := image.Verify{Image: ref, Verifier: s.Verifier, Commit: s.Source.Commit}.Run(ctx)
	if err != nil {
		return err
	}
	_, err = cosignverify.Verify(ctx, ref, s.PublicKey, cosignverify.Types...)
	return err
}
