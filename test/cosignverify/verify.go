// Package cosignverify checks images with cosign's own library
// (github.com/sigstore/cosign/v3), as `cosign verify --key` and `cosign
// verify-attestation --key --type` check them, so the tests prove that what
// bundlegen signs is what cosign, and the admission policy engines built on
// it (sigstore policy-controller, Kyverno), accept. Offline, as the release
// is signed: a public key is the trust root, no transparency log (Rekor), no
// certificate authority (Fulcio), no timestamp authority; the same as the
// CLI's --insecure-ignore-tlog=true.
//
// Test code only: cosign is a heavy module (README, "Prerequisites"), and
// nothing that ships links it.
package cosignverify

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/in-toto/in-toto-golang/in_toto"
	slsa1 "github.com/in-toto/in-toto-golang/in_toto/slsa_provenance/v1"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/cosign/attestation"
	"github.com/sigstore/cosign/v3/pkg/oci"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Types are cosign's names of the predicate types bundlegen attests with.
var Types = []string{"spdxjson", "slsaprovenance1"}

// predicateTypes is the part of cosign's options.PredicateTypeMap
// (cmd/cosign/cli/options/predicate.go) for Types, with the same constants.
// cosign's own filter (pkg/policy.AttestationToPayloadJSON) is not linked:
// it imports the CLI's options and with them every cloud registry's
// credential helper (the AWS and Azure SDKs, 70 MB more to download).
var predicateTypes = map[string]string{"spdxjson": in_toto.PredicateSPDX, "slsaprovenance1": slsa1.PredicateSLSAProvenance}

// Verified is what cosign found valid.
type Verified struct {
	// Signatures is the number of signatures of the image by the key.
	Signatures int
	// Attestations maps each predicate type asked for (cosign's name:
	// spdxjson, slsaprovenance1) to the in-toto statements of that type by
	// the key (the payloads `cosign verify-attestation --type` prints).
	Attestations map[string][][]byte
}

// Verify checks ref as `cosign verify --key` does (a signature by the key
// over a payload naming the image's digest) and, for each of types (cosign's
// predicate type names), as `cosign verify-attestation --key --type T` does
// (an attestation by the key whose statement is about the image, of that
// predicate type). publicKey is the PEM public key (cosign.pub).
func Verify(ctx context.Context, ref string, publicKey []byte, types ...string) (Verified, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(publicKey)
	if err != nil {
		return Verified{}, fmt.Errorf("cosign: public key: %w", err)
	}
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return Verified{}, fmt.Errorf("cosign: public key: %w", err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return Verified{}, err
	}
	// What `cosign verify --key cosign.pub --insecure-ignore-tlog=true` sets
	// (cmd/cosign/cli/verify: CheckClaims gives the claim verifiers).
	co := &cosign.CheckOpts{
		SigVerifier:   verifier,
		IgnoreTlog:    true,
		IgnoreSCT:     true,
		ClaimVerifier: cosign.SimpleClaimVerifier,
	}
	sigs, _, err := cosign.VerifyImageSignatures(ctx, r, co)
	if err != nil {
		return Verified{}, fmt.Errorf("cosign verify %s: %w", ref, err)
	}
	res := Verified{Signatures: len(sigs), Attestations: map[string][][]byte{}}
	if len(types) == 0 {
		return res, nil
	}
	co.ClaimVerifier = cosign.IntotoSubjectClaimVerifier
	atts, _, err := cosign.VerifyImageAttestations(ctx, r, co)
	if err != nil {
		return res, fmt.Errorf("cosign verify-attestation %s: %w", ref, err)
	}
	var problems []string
	for _, t := range types {
		found, err := ofType(t, atts)
		if err != nil {
			return res, fmt.Errorf("cosign verify-attestation --type %s %s: %w", t, ref, err)
		}
		if len(found) == 0 {
			problems = append(problems, "no attestation of type "+t)
		}
		res.Attestations[t] = found
	}
	if len(problems) > 0 {
		return res, fmt.Errorf("cosign verify-attestation %s: %s", ref, strings.Join(problems, ", "))
	}
	return res, nil
}

// ofType is the filter of `cosign verify-attestation --type t`, as cosign's
// pkg/policy.AttestationToPayloadJSON does it: the verified attestations
// whose statement (cosign's attestation.Statement, read from the envelope)
// has t's predicate type. It returns the statements.
func ofType(t string, atts []oci.Signature) ([][]byte, error) {
	uri, ok := predicateTypes[t]
	if !ok {
		return nil, fmt.Errorf("predicate type %q: want one of %v", t, Types)
	}
	var out [][]byte
	for _, a := range atts {
		p, err := a.Payload()
		if err != nil {
			return nil, fmt.Errorf("getting payload: %w", err)
		}
		var env struct {
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal(p, &env); err != nil {
			return nil, fmt.Errorf("unmarshaling payload data: %w", err)
		}
		st, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			return nil, fmt.Errorf("decoding payload: %w", err)
		}
		var statement attestation.Statement
		if err := statement.UnmarshalJSON(st); err != nil {
			return nil, fmt.Errorf("unmarshal in-toto statement: %w", err)
		}
		if statement.PredicateType == uri && !slices.ContainsFunc(out, func(b []byte) bool { return string(b) == string(st) }) {
			out = append(out, st)
		}
	}
	return out, nil
}
