package image

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ita1 "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// The layout cosign reads for key-based attestations (`cosign attest --key`,
// `cosign verify-attestation --key`): an image tagged sha256-<hex>.att beside
// the attested manifest, one layer per attestation holding a DSSE envelope
// of an in-toto statement, its predicate type in an annotation.
const (
	// DSSEMediaType is the media type of an attestation layer: a DSSE
	// envelope (cosign's types.DssePayloadType).
	DSSEMediaType = "application/vnd.dsse.envelope.v1+json"
	// InTotoPayloadType is the payload type of the envelope: an in-toto
	// statement.
	InTotoPayloadType = "application/vnd.in-toto+json"
	// PredicateTypeAnnotation holds the statement's predicate type on its
	// layer, as cosign writes it.
	PredicateTypeAnnotation = "predicateType"
	// PredicateSPDX is the predicate type of an SPDX document, the one
	// `cosign verify-attestation --type spdxjson` looks for.
	PredicateSPDX = "https://spdx.dev/Document"
	// attestationTagSuffix ends the tag of the attestations of a manifest.
	attestationTagSuffix = ".att"
)

// CosignTypes maps the predicate types the images are attested with to
// cosign's names for them (`cosign verify-attestation --type NAME`).
var CosignTypes = map[string]string{PredicateSPDX: "spdxjson", PredicateSLSAProvenance: "slsaprovenance1"}

// dsseEnvelope is a DSSE envelope (github.com/secure-systems-lab/dsse), in
// the field order and spelling cosign writes.
type dsseEnvelope struct {
	PayloadType string          `json:"payloadType"`
	Payload     string          `json:"payload"`
	Signatures  []dsseSignature `json:"signatures"`
}

type dsseSignature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// pae is DSSE's pre-authentication encoding of a payload: what is signed.
func pae(payloadType string, payload []byte) []byte {
	return fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(payload), payload)
}

// SBOMStatement wraps the SPDX document sbom (as SBOM makes it) of subject
// in an in-toto statement v1 of predicate type PredicateSPDX, the form
// `cosign attest --type spdxjson` gives it. Same input, same bytes.
func SBOMStatement(sbom []byte, subject Subject) ([]byte, error) {
	if !json.Valid(sbom) {
		return nil, errors.New("the SBOM of " + subject.Name + " is not JSON")
	}
	b, err := json.Marshal(struct {
		Type          string            `json:"_type"`
		Subject       []statementTarget `json:"subject"`
		PredicateType string            `json:"predicateType"`
		Predicate     json.RawMessage   `json:"predicate"`
	}{
		Type:          ita1.StatementTypeUri,
		Subject:       []statementTarget{{Name: subject.Name, Digest: map[string]string{subject.Digest.Algorithm: subject.Digest.Hex}}},
		PredicateType: PredicateSPDX,
		Predicate:     sbom,
	})
	if err != nil {
		return nil, err
	}
	return canonicalJSON(b)
}

type statementTarget struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Attest signs the in-toto statement as a DSSE envelope and adds it, as
// `cosign attest --key` does, to the image tagged sha256-<hex>.att in d's
// repository (made when missing): one layer of media type DSSEMediaType
// whose annotation PredicateTypeAnnotation is predicateType. Attestations
// already there are kept, as cosign keeps them unless told to replace
// them. It returns the attestation tag.
func Attest(ctx context.Context, d name.Digest, statement []byte, predicateType string, s Signer) (name.Tag, error) {
	tag, err := cosignTag(d, attestationTagSuffix)
	if err != nil {
		return name.Tag{}, err
	}
	sig, _, err := s.Sign(ctx, pae(InTotoPayloadType, statement))
	if err != nil {
		return name.Tag{}, fmt.Errorf("signing the %s attestation of %s: %w", predicateType, d, err)
	}
	env, err := json.Marshal(dsseEnvelope{
		PayloadType: InTotoPayloadType,
		Payload:     base64.StdEncoding.EncodeToString(statement),
		Signatures:  []dsseSignature{{Sig: base64.StdEncoding.EncodeToString(sig)}},
	})
	if err != nil {
		return name.Tag{}, err
	}
	// cosign's attestation layers carry an empty signature annotation: the
	// signature is in the envelope.
	ann := map[string]string{SignatureAnnotation: "", PredicateTypeAnnotation: predicateType}
	if err := appendLayer(ctx, tag, env, DSSEMediaType, ann); err != nil {
		return name.Tag{}, fmt.Errorf("attaching the %s attestation of %s to %s: %w", predicateType, d, tag, err)
	}
	return tag, nil
}

// checkAttestation looks, among the layers of the attestations of d, for an
// envelope signed by the key whose statement is about d, of predicateType,
// and passes check.
func (v Verify) checkAttestation(ctx context.Context, d name.Digest, predicateType string, check func(statement []byte) error) error {
	tag, err := cosignTag(d, attestationTagSuffix)
	if err != nil {
		return err
	}
	img, m, err := cosignImage(ctx, tag, "attested")
	if err != nil {
		return err
	}
	var reasons []string
	for _, l := range m.Layers {
		if l.MediaType != DSSEMediaType || l.Annotations[PredicateTypeAnnotation] != predicateType {
			continue
		}
		st, err := v.checkEnvelope(ctx, img, l, d, predicateType)
		if err == nil {
			err = check(st)
		}
		if err == nil {
			return nil
		}
		reasons = append(reasons, fmt.Sprintf("layer %s: %v", l.Digest, err))
	}
	if len(reasons) == 0 {
		return fmt.Errorf("%s holds no %s attestation (a %s layer annotated %s=%s); sign the image with `bundlegen sign`",
			tag.TagStr(), predicateType, DSSEMediaType, PredicateTypeAnnotation, predicateType)
	}
	return fmt.Errorf("no valid %s attestation by the key in %s: %s", predicateType, tag.TagStr(), strings.Join(reasons, "; "))
}

// checkEnvelope checks one attestation layer: an envelope of an in-toto
// statement signed by the key, of predicateType, whose subject is d.
func (v Verify) checkEnvelope(ctx context.Context, img v1.Image, l v1.Descriptor, d name.Digest, predicateType string) ([]byte, error) {
	b, err := readBlob(img, l.Digest)
	if err != nil {
		return nil, err
	}
	var env dsseEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("not a DSSE envelope: %w", err)
	}
	if env.PayloadType != InTotoPayloadType {
		return nil, fmt.Errorf("payload type %q, want %q", env.PayloadType, InTotoPayloadType)
	}
	st, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, fmt.Errorf("the envelope's payload: %w", err)
	}
	if !slices.ContainsFunc(env.Signatures, func(s dsseSignature) bool {
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		return err == nil && v.Verifier.Verify(ctx, pae(env.PayloadType, st), sig, nil) == nil
	}) {
		return nil, fmt.Errorf("none of its %d signatures is by the key", len(env.Signatures))
	}
	var s ita1.Statement
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(st, &s); err != nil {
		return nil, fmt.Errorf("not an in-toto statement: %w", err)
	}
	if s.GetPredicateType() != predicateType {
		return nil, fmt.Errorf("its statement's predicate type is %q, its annotation says %q", s.GetPredicateType(), predicateType)
	}
	if !slices.ContainsFunc(s.GetSubject(), func(r *ita1.ResourceDescriptor) bool {
		return "sha256:"+r.GetDigest()["sha256"] == d.DigestStr()
	}) {
		return nil, fmt.Errorf("its statement is not about %s", d.DigestStr())
	}
	return st, nil
}

// sbomPredicate returns the SPDX document of an SBOM statement.
func sbomPredicate(statement []byte) ([]byte, error) {
	var st struct {
		Predicate json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(statement, &st); err != nil {
		return nil, fmt.Errorf("not an in-toto statement: %w", err)
	}
	return st.Predicate, nil
}
