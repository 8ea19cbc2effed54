package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Verify checks an image as Sign leaves it: a signature by the key, a signed
// SBOM and a signed provenance statement attached as referrers, and the
// provenance naming the expected commit.
type Verify struct {
	// Image is the image to check (by tag or digest).
	Image string
	// Verifier checks signatures.
	Verifier Verifier
	// Commit is the commit the provenance must name (the release's).
	Commit string
}

// Verified says what Verify found.
type Verified struct {
	// Image is the verified image by digest.
	Image string `json:"image"`
	// SBOM and Provenance are the verified documents by digest.
	SBOM       string `json:"sbom"`
	Provenance string `json:"provenance"`
	// Commit is the commit the provenance names.
	Commit string `json:"commit"`
	// Attestations are the predicate types of the image's attestations
	// verified in cosign's layout (`cosign verify-attestation`).
	Attestations []string `json:"attestations"`
}

// VerifyError lists everything Verify found missing or wrong.
type VerifyError struct {
	Image    string
	Problems []string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("%s is not verified:\n  - %s", e.Image, strings.Join(e.Problems, "\n  - "))
}

// Run checks the image. The error is a *VerifyError naming every problem
// when the image is reachable but not verified.
func (v Verify) Run(ctx context.Context) (Verified, error) {
	if v.Verifier == nil {
		return Verified{}, errors.New("no public key: give --key FILE")
	}
	if v.Commit == "" {
		return Verified{}, errors.New("no expected commit: give --commit or --release")
	}
	ref, err := ParseReference(v.Image)
	if err != nil {
		return Verified{}, err
	}
	desc, err := remote.Head(ref, remoteOptions(ctx)...)
	if err != nil {
		return Verified{}, fmt.Errorf("reading %s: %w", ref, err)
	}
	d := ref.Context().Digest(desc.Digest.String())
	res := Verified{Image: d.String()}
	verr := &VerifyError{Image: d.String()}
	if err := v.checkSignature(ctx, d); err != nil {
		verr.Problems = append(verr.Problems, "image signature: "+err.Error())
	}
	idx, err := remote.Referrers(d, remoteOptions(ctx)...)
	if err != nil {
		return Verified{}, fmt.Errorf("listing the referrers of %s: %w", d, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return Verified{}, fmt.Errorf("listing the referrers of %s: %w", d, err)
	}
	if len(im.Manifests) > maxReferrers {
		return Verified{}, fmt.Errorf("%s has %d referrers, more than the %d bundlegen reads: remove the referrers no longer wanted from the registry (oras discover lists them), then verify again",
			d, len(im.Manifests), maxReferrers)
	}
	var sbomProblems, provProblems []string
	for _, r := range im.Manifests {
		rd := d.Context().Digest(r.Digest.String())
		at, data, err := readArtifact(ctx, rd, desc.Digest)
		if err != nil {
			// Registries that list a referrer by its config's media type do
			// not say what it is: an unreadable one may be either document.
			problem := fmt.Sprintf("referrer %s: %v", rd.DigestStr(), err)
			switch r.ArtifactType {
			case SBOMArtifactType:
				sbomProblems = append(sbomProblems, problem)
			case ProvenanceArtifactType:
				provProblems = append(provProblems, problem)
			default:
				sbomProblems, provProblems = append(sbomProblems, problem), append(provProblems, problem)
			}
			continue
		}
		switch at {
		case SBOMArtifactType:
			if res.SBOM != "" {
				continue
			}
			if err := v.checkSBOM(ctx, rd, data, desc.Digest); err != nil {
				sbomProblems = append(sbomProblems, fmt.Sprintf("%s: %v", rd.DigestStr(), err))
				continue
			}
			res.SBOM = rd.String()
		case ProvenanceArtifactType:
			if res.Provenance != "" {
				continue
			}
			commit, err := v.checkProvenance(ctx, rd, data, desc.Digest)
			if err != nil {
				provProblems = append(provProblems, fmt.Sprintf("%s: %v", rd.DigestStr(), err))
				continue
			}
			res.Provenance, res.Commit = rd.String(), commit
		}
	}
	for _, att := range []struct {
		what, predicateType string
		check               func([]byte) error
	}{
		{"SBOM", PredicateSPDX, func(st []byte) error {
			doc, err := sbomPredicate(st)
			if err == nil {
				err = sbomDescribes(doc, desc.Digest)
			}
			return err
		}},
		{"provenance", PredicateSLSAProvenance, func(st []byte) error {
			_, err := v.provenanceNames(st, desc.Digest)
			return err
		}},
	} {
		if err := v.checkAttestation(ctx, d, att.predicateType, att.check); err != nil {
			verr.Problems = append(verr.Problems, fmt.Sprintf("%s attestation (what `cosign verify-attestation --type %s` reads): %v", att.what, CosignTypes[att.predicateType], err))
			continue
		}
		res.Attestations = append(res.Attestations, att.predicateType)
	}
	if res.SBOM == "" {
		verr.Problems = append(verr.Problems, missing("SBOM", SBOMArtifactType, sbomProblems))
	}
	if res.Provenance == "" {
		verr.Problems = append(verr.Problems, missing("provenance", ProvenanceArtifactType, provProblems))
	}
	if len(verr.Problems) > 0 {
		return res, verr
	}
	return res, nil
}

func missing(what, artifactType string, problems []string) string {
	if len(problems) == 0 {
		return fmt.Sprintf("%s: none attached (no referrer of artifact type %s); sign the image with `bundlegen sign`", what, artifactType)
	}
	return fmt.Sprintf("%s: no attached one is valid: %s", what, strings.Join(problems, "; "))
}

// checkSignature looks for a signature of d by the key among the layers of
// its signature image.
func (v Verify) checkSignature(ctx context.Context, d name.Digest) error {
	tag, err := signatureTag(d)
	if err != nil {
		return err
	}
	img, m, err := cosignImage(ctx, tag, "signed")
	if err != nil {
		return err
	}
	var reasons []string
	for _, l := range m.Layers {
		if l.MediaType != SimpleSigningMediaType {
			continue
		}
		err := func() error {
			sig, err := decodeSig(l.Annotations[SignatureAnnotation])
			if err != nil {
				return err
			}
			p, err := readBlob(img, l.Digest)
			if err != nil {
				return err
			}
			if err := v.Verifier.Verify(ctx, p, sig, l.Annotations); err != nil {
				return fmt.Errorf("not signed by the key: %w", err)
			}
			return checkPayload(p, d)
		}()
		if err == nil {
			return nil
		}
		reasons = append(reasons, fmt.Sprintf("layer %s: %v", l.Digest, err))
	}
	if len(reasons) == 0 {
		return fmt.Errorf("%s holds no signature layer (%s)", tag.TagStr(), SimpleSigningMediaType)
	}
	return fmt.Errorf("no valid signature by the key in %s: %s", tag.TagStr(), strings.Join(reasons, "; "))
}

// readArtifact reads an artifact manifest that refers to subject and returns
// its artifact type and the content of its only layer.
func readArtifact(ctx context.Context, rd name.Digest, subject v1.Hash) (string, []byte, error) {
	img, err := remote.Image(rd, remoteOptions(ctx)...)
	if err != nil {
		return "", nil, fmt.Errorf("reading: %w", err)
	}
	m, err := img.Manifest()
	if err != nil {
		return "", nil, fmt.Errorf("reading: %w", err)
	}
	at := m.ArtifactType
	if at == "" {
		at = string(m.Config.MediaType)
	}
	if at != SBOMArtifactType && at != ProvenanceArtifactType {
		return at, nil, nil
	}
	if m.Subject == nil || m.Subject.Digest != subject {
		return "", nil, fmt.Errorf("its subject is not %s", subject)
	}
	if len(m.Layers) != 1 || string(m.Layers[0].MediaType) != at {
		return "", nil, fmt.Errorf("want one layer of media type %s, found %d layers", at, len(m.Layers))
	}
	data, err := readBlob(img, m.Layers[0].Digest)
	return at, data, err
}

// readBlob reads a layer of img by digest; the registry's content is checked
// against the digest as it is read.
func readBlob(img v1.Image, h v1.Hash) ([]byte, error) {
	l, err := img.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", h, err)
	}
	if len(b) > maxDocument {
		return nil, fmt.Errorf("blob %s is larger than %d bytes", h, maxDocument)
	}
	return b, nil
}

func (v Verify) checkSBOM(ctx context.Context, rd name.Digest, data []byte, subject v1.Hash) error {
	if err := v.checkSignature(ctx, rd); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	return sbomDescribes(data, subject)
}

// sbomDescribes checks that data is an SPDX SBOM of the image subject.
func sbomDescribes(data []byte, subject v1.Hash) error {
	doc, err := ReadSBOM(data)
	if err != nil {
		return err
	}
	for _, p := range doc.Packages {
		if p.PackageSPDXIdentifier == "Image" {
			if p.PackageVersion != subject.String() {
				return fmt.Errorf("it describes %s, not %s", p.PackageVersion, subject)
			}
			return nil
		}
	}
	return errors.New("it describes no image (no package SPDXRef-Image)")
}

func (v Verify) checkProvenance(ctx context.Context, rd name.Digest, data []byte, subject v1.Hash) (string, error) {
	if err := v.checkSignature(ctx, rd); err != nil {
		return "", fmt.Errorf("signature: %w", err)
	}
	return v.provenanceNames(data, subject)
}

// provenanceNames checks that data is a provenance statement of the image
// subject naming the expected commit, and returns the commit.
func (v Verify) provenanceNames(data []byte, subject v1.Hash) (string, error) {
	commit, sd, err := ProvenanceCommit(data)
	if err != nil {
		return "", err
	}
	if sd != subject.String() {
		return "", fmt.Errorf("its subject is %s, not %s", sd, subject)
	}
	if !strings.EqualFold(commit, v.Commit) {
		return "", fmt.Errorf("it names commit %s, but the release names %s", commit, v.Commit)
	}
	return commit, nil
}

// cosignImage reads the image cosign keeps at tag (signatures or
// attestations of an image) and its manifest, refusing more layers than
// are read (maxCosignLayers); what names what cosign or bundlegen would
// have done to make it ("signed", "attested").
func cosignImage(ctx context.Context, tag name.Tag, what string) (v1.Image, *v1.Manifest, error) {
	img, err := remote.Image(tag, remoteOptions(ctx)...)
	if isNotFound(err) {
		return nil, nil, fmt.Errorf("none (no %s); sign the image with `bundlegen sign`", tag.TagStr())
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", tag, err)
	}
	if len(m.Layers) > maxCosignLayers {
		return nil, nil, fmt.Errorf("%s has %d layers, more than the %d read: it is not an image cosign or bundlegen %s; remove it from the registry and sign again", tag.TagStr(), len(m.Layers), maxCosignLayers, what)
	}
	return img, m, nil
}
