package image_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/cosignverify"
)

// cosignTypes are cosign's names of the predicate types bundlegen attests
// with (`cosign verify-attestation --type`).
var cosignTypes = []string{"spdxjson", "slsaprovenance1"}

var testSource = image.Source{
	Repository: "https://github.com/inferencestack/inferencestack",
	Commit:     strings.Repeat("ab", 20),
	Time:       time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC),
}

// keyPair returns a new key pair (image.GenerateKeyPair).
func keyPair(t *testing.T) (priv, pub []byte) {
	t.Helper()
	priv, pub, err := image.GenerateKeyPair()
	require.NoError(t, err)
	return priv, pub
}

// testRegistry serves an in-process registry with or without the referrers
// API and returns its host.
func testRegistry(t *testing.T, referrers bool) string {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(
		ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(referrers)))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func catalogDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"demo/catalog.yaml": "schema: olm.package\nname: demo\n---\nschema: olm.bundle\npackage: demo\nname: demo.v1.0.0\n" +
			"image: quay.io/acme/demo-bundle@sha256:" + strings.Repeat("1", 64) + "\nproperties:\n- type: olm.package\n  value:\n    packageName: demo\n    version: 1.0.0\n",
	})
	return dir
}

func TestSBOMAndProvenanceAreReproducible(t *testing.T) {
	subject := image.Subject{Name: "quay.io/acme/x", Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("c", 64)}}
	// A Linux executable that links go-cmp, built like the operator's manager.
	binary := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-trimpath", "-o", binary, "./testdata/withmodules")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	bundle := bundleDir(t)
	writeFiles(t, bundle, map[string]string{"manifests/demo.clusterserviceversion.yaml": "kind: ClusterServiceVersion\nspec:\n  relatedImages:\n" +
		"  - name: operator\n    image: quay.io/acme/op@sha256:" + strings.Repeat("2", 64) + "\n  - name: cache\n    image: docker.io/library/postgres:16.4\n"})
	tests := []struct {
		kind   image.Kind
		input  string
		change func()                                // changes the input
		want   []string                              // in the SBOM
		wantP  []string                              // in the provenance
		check  func(t *testing.T, sbom, prov []byte) // more checks
	}{{
		kind: image.KindBundle, input: bundle,
		change: func() {
			writeFiles(t, bundle, map[string]string{"manifests/demo.crd.yaml": "kind: CustomResourceDefinition\n# changed\n"})
		},
		want:  []string{`"./manifests/demo.crd.yaml"`, `"./metadata/annotations.yaml"`, `"quay.io/acme/op"`, `"docker.io/library/postgres:16.4"`, `related image cache (by tag: no digest)`},
		wantP: []string{`"manifests/demo.crd.yaml"`},
	}, {
		kind: image.KindCatalog, input: catalogDir(t),
		want:  []string{`"./configs/demo/catalog.yaml"`, `"quay.io/acme/demo-bundle"`, `bundle demo.v1.0.0 of package demo, version 1.0.0`},
		wantP: []string{`"configs/demo/catalog.yaml"`},
	}, {
		kind: image.KindOperator, input: binary,
		want:  []string{`"github.com/google/go-cmp"`, `"pkg:golang/github.com/google/go-cmp@v0.7.0"`, `"pkg:golang/stdlib@`, `"./manager"`, `"relationshipType": "DESCENDANT_OF"`},
		wantP: []string{`"manager"`, `"base layer (assembled by bundlegen)"`},
	}}
	for _, tc := range tests {
		t.Run(string(tc.kind), func(t *testing.T) {
			cmd := []string{"bundlegen", "image", string(tc.kind), "INPUT"}
			gen := func(src image.Source) ([]byte, []byte) {
				sbom, err := image.SBOM(tc.kind, tc.input, subject, src)
				require.NoError(t, err)
				prov, err := image.Provenance(tc.kind, tc.input, subject, src, cmd)
				require.NoError(t, err)
				return sbom, prov
			}
			sbom, prov := gen(testSource)
			sbom2, prov2 := gen(testSource)
			require.Equal(t, string(sbom), string(sbom2), "the same input gives the same SBOM")
			require.Equal(t, string(prov), string(prov2), "the same input gives the same provenance")
			doc, err := image.ReadSBOM(sbom)
			require.NoError(t, err)
			require.Equal(t, "2026-11-25T12:00:00Z", doc.CreationInfo.Created, "the time is the commit's")
			for _, w := range tc.want {
				require.Contains(t, string(sbom), w)
			}
			for _, w := range tc.wantP {
				require.Contains(t, string(prov), w)
			}
			commit, sd, err := image.ProvenanceCommit(prov)
			require.NoError(t, err)
			require.Equal(t, testSource.Commit, commit)
			require.Equal(t, subject.Digest.String(), sd)

			other := testSource
			other.Commit = strings.Repeat("cd", 20)
			other.Time = other.Time.Add(time.Hour)
			sbom3, prov3 := gen(other)
			require.NotEqual(t, string(sbom), string(sbom3), "another commit gives another SBOM")
			require.NotEqual(t, string(prov), string(prov3), "another commit gives another provenance")
			if tc.change != nil {
				tc.change()
				sbom4, prov4 := gen(testSource)
				require.NotEqual(t, string(sbom), string(sbom4), "another input gives another SBOM")
				require.NotEqual(t, string(prov), string(prov4), "another input gives another provenance")
			}
		})
	}
}

func TestSourceCheck(t *testing.T) {
	_, err := image.SBOM(image.KindBundle, bundleDir(t), image.Subject{}, image.Source{Repository: "r", Commit: "HEAD", Time: time.Unix(1, 0)})
	require.ErrorContains(t, err, `commit "HEAD" is not a full hexadecimal git commit`)
	_, err = image.Provenance(image.KindBundle, bundleDir(t), image.Subject{}, image.Source{Repository: "r", Commit: testSource.Commit}, nil)
	require.ErrorContains(t, err, "commit time is missing")
}

func TestLoadKeys(t *testing.T) {
	priv, pub := keyPair(t)
	_, err := image.LoadKeySigner(pub, "pub.pem")
	require.ErrorContains(t, err, "signing key pub.pem")
	_, err = image.LoadKeyVerifier(priv, "key.pem")
	require.ErrorContains(t, err, "public key key.pem")
	s, err := image.LoadKeySigner(priv, "key.pem")
	require.NoError(t, err)
	got, err := s.PublicKeyPEM()
	require.NoError(t, err)
	require.Equal(t, string(pub), string(got))
}

// signed pushes the bundle image of dir to host and signs it with priv.
func signed(t *testing.T, host, dir string, priv []byte) (image.Signed, string) {
	t.Helper()
	ctx := context.Background()
	ref := host + "/acme/demo-bundle:v1.0.0"
	_, err := image.Build{Kind: image.KindBundle, Dir: dir, Push: ref}.Run(ctx)
	require.NoError(t, err)
	s, err := image.LoadKeySigner(priv, "key.pem")
	require.NoError(t, err)
	res, err := image.Sign{Kind: image.KindBundle, Input: dir, Image: ref, Source: testSource,
		Command: []string{"bundlegen", "image", "bundle", "DIR"}, Signer: s}.Run(ctx)
	require.NoError(t, err)
	return res, ref
}

func verify(t *testing.T, ref string, pub []byte, commit string) (image.Verified, error) {
	t.Helper()
	v, err := image.LoadKeyVerifier(pub, "pub.pem")
	require.NoError(t, err)
	return image.Verify{Image: ref, Verifier: v, Commit: commit}.Run(context.Background())
}

func TestSignAndVerify(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		t.Run(map[bool]string{true: "referrers API", false: "referrers tag schema"}[referrers], func(t *testing.T) {
			host := testRegistry(t, referrers)
			priv, pub := keyPair(t)
			dir := bundleDir(t)
			res, ref := signed(t, host, dir, priv)
			require.Len(t, res.Signatures, 3)

			got, err := verify(t, ref, pub, testSource.Commit)
			require.NoError(t, err)
			require.Equal(t, res.Image, got.Image)
			require.Equal(t, res.SBOM, got.SBOM)
			require.Equal(t, res.Provenance, got.Provenance)
			require.Equal(t, testSource.Commit, got.Commit)
			require.Equal(t, []string{image.PredicateSPDX, image.PredicateSLSAProvenance}, got.Attestations)

			// cosign's own library agrees: the image's signature, as `cosign
			// verify --key`, and an attestation of each type, as `cosign
			// verify-attestation --key --type`, whose statement holds the
			// document attached as a referrer.
			byCosign, err := cosignverify.Verify(context.Background(), ref, pub, cosignTypes...)
			require.NoError(t, err)
			require.Equal(t, 1, byCosign.Signatures)
			require.Len(t, byCosign.Attestations["spdxjson"], 1)
			require.Contains(t, string(byCosign.Attestations["spdxjson"][0]), `"predicateType": "https://spdx.dev/Document"`)
			require.Contains(t, string(byCosign.Attestations["spdxjson"][0]), `"spdxVersion": "SPDX-2.3"`)
			require.Len(t, byCosign.Attestations["slsaprovenance1"], 1)
			require.Contains(t, string(byCosign.Attestations["slsaprovenance1"][0]), `"predicateType": "https://slsa.dev/provenance/v1"`)
			require.Contains(t, string(byCosign.Attestations["slsaprovenance1"][0]), testSource.Commit)
			for _, doc := range []string{res.SBOM, res.Provenance} {
				_, err := cosignverify.Verify(context.Background(), doc, pub)
				require.NoError(t, err, "cosign verify --key of the referrer %s", doc)
			}

			d, err := name.NewDigest(res.Image, name.Insecure)
			require.NoError(t, err)
			fallback := d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1))
			_, err = remote.Head(fallback)
			if referrers {
				require.Error(t, err, "a registry with the referrers API needs no fallback tag")
			} else {
				require.NoError(t, err, "without the referrers API, the referrers are listed under the tag %s", fallback)
			}

			// Signing again (the same commit) attaches the same documents.
			again, _ := signed(t, host, dir, priv)
			require.Equal(t, res.SBOM, again.SBOM)
			require.Equal(t, res.Provenance, again.Provenance)
			_, err = verify(t, ref, pub, testSource.Commit)
			require.NoError(t, err)
			_, err = cosignverify.Verify(context.Background(), ref, pub, cosignTypes...)
			require.NoError(t, err)
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	ctx := context.Background()
	priv, pub := keyPair(t)
	_, otherPub := keyPair(t)

	t.Run("another key", func(t *testing.T) {
		host := testRegistry(t, true)
		_, ref := signed(t, host, bundleDir(t), priv)
		_, err := verify(t, ref, otherPub, testSource.Commit)
		var verr *image.VerifyError
		require.ErrorAs(t, err, &verr)
		require.Len(t, verr.Problems, 5, "the image, its SBOM and its provenance, both attestations: %v", err)
		require.ErrorContains(t, err, "image signature: no valid signature by the key")
		require.ErrorContains(t, err, "SBOM: no attached one is valid")
		require.ErrorContains(t, err, "SBOM attestation (what `cosign verify-attestation --type spdxjson` reads): no valid https://spdx.dev/Document attestation by the key in sha256-")
		require.ErrorContains(t, err, "provenance attestation (what `cosign verify-attestation --type slsaprovenance1` reads): no valid https://slsa.dev/provenance/v1 attestation by the key")
		require.ErrorContains(t, err, "none of its 1 signatures is by the key")
		_, err = cosignverify.Verify(ctx, ref, otherPub)
		require.Error(t, err, "cosign refuses the signature too")
		_, err = cosignverify.Verify(ctx, ref, otherPub, cosignTypes...)
		require.Error(t, err, "cosign refuses the attestations too")
	})
	t.Run("wrong commit", func(t *testing.T) {
		host := testRegistry(t, false)
		_, ref := signed(t, host, bundleDir(t), priv)
		_, err := verify(t, ref, pub, strings.Repeat("ef", 20))
		require.ErrorContains(t, err, "provenance: no attached one is valid")
		require.ErrorContains(t, err, "it names commit "+testSource.Commit+", but the release names "+strings.Repeat("ef", 20))
		require.ErrorContains(t, err, "provenance attestation (what `cosign verify-attestation --type slsaprovenance1` reads): no valid https://slsa.dev/provenance/v1 attestation by the key in sha256-")
		require.NotContains(t, err.Error(), "image signature")
		require.NotContains(t, err.Error(), "SBOM")
	})
	t.Run("another image under the tag", func(t *testing.T) {
		host := testRegistry(t, true)
		_, ref := signed(t, host, bundleDir(t), priv)
		img, err := random.Image(64, 1)
		require.NoError(t, err)
		_, err = image.Push(ctx, img, ref)
		require.NoError(t, err)
		_, err = verify(t, ref, pub, testSource.Commit)
		require.ErrorContains(t, err, "image signature: none (no sha256-")
		require.ErrorContains(t, err, "SBOM: none attached")
		require.ErrorContains(t, err, "provenance: none attached")
	})
	t.Run("tampered payload", func(t *testing.T) {
		host := testRegistry(t, true)
		res, ref := signed(t, host, bundleDir(t), priv)
		// Keep the signature, change the payload it covers (the annotation
		// survives: only the layer's content differs).
		d, err := name.NewDigest(res.Image, name.Insecure)
		require.NoError(t, err)
		sigTag := d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + ".sig")
		sigImg, err := remote.Image(sigTag)
		require.NoError(t, err)
		m, err := sigImg.Manifest()
		require.NoError(t, err)
		p, err := sigImg.LayerByDigest(m.Layers[0].Digest)
		require.NoError(t, err)
		rc, err := p.Compressed()
		require.NoError(t, err)
		payload, err := io.ReadAll(rc)
		require.NoError(t, err)
		forged := []byte(strings.Replace(string(payload), `"optional":null`, `"optional":{"forged":"yes"}`, 1))
		require.NotEqual(t, payload, forged)
		base, err := mutate.Append(emptyOCI(t), mutate.Addendum{
			Layer: static.NewLayer(forged, image.SimpleSigningMediaType), MediaType: image.SimpleSigningMediaType,
			Annotations: m.Layers[0].Annotations,
		})
		require.NoError(t, err)
		require.NoError(t, remote.Write(sigTag, base))
		_, err = verify(t, ref, pub, testSource.Commit)
		require.ErrorContains(t, err, "image signature: no valid signature by the key")
		require.ErrorContains(t, err, "not signed by the key")
	})
	t.Run("a signature copied from another image", func(t *testing.T) {
		host := testRegistry(t, true)
		res, _ := signed(t, host, bundleDir(t), priv)
		other := bundleDir(t)
		writeFiles(t, other, map[string]string{"manifests/demo.crd.yaml": "kind: CustomResourceDefinition\n# another\n"})
		ref := host + "/acme/demo-bundle:v2.0.0"
		pushed, err := image.Build{Kind: image.KindBundle, Dir: other, Push: ref}.Run(ctx)
		require.NoError(t, err)
		from, err := name.NewDigest(res.Image, name.Insecure)
		require.NoError(t, err)
		to, err := name.NewDigest(pushed.Pushed, name.Insecure)
		require.NoError(t, err)
		sigImg, err := remote.Image(from.Context().Tag(strings.Replace(from.DigestStr(), ":", "-", 1) + ".sig"))
		require.NoError(t, err)
		require.NoError(t, remote.Write(to.Context().Tag(strings.Replace(to.DigestStr(), ":", "-", 1)+".sig"), sigImg))
		attImg, err := remote.Image(from.Context().Tag(strings.Replace(from.DigestStr(), ":", "-", 1) + ".att"))
		require.NoError(t, err)
		require.NoError(t, remote.Write(to.Context().Tag(strings.Replace(to.DigestStr(), ":", "-", 1)+".att"), attImg))
		_, err = verify(t, ref, pub, testSource.Commit)
		require.ErrorContains(t, err, "image signature: no valid signature by the key")
		require.ErrorContains(t, err, "the signed payload is about "+from.DigestStr()+", not "+to.DigestStr())
		require.ErrorContains(t, err, "SBOM attestation (what `cosign verify-attestation --type spdxjson` reads): no valid https://spdx.dev/Document attestation by the key in sha256-")
		require.ErrorContains(t, err, "its statement is not about "+to.DigestStr())
		_, err = cosignverify.Verify(ctx, ref, pub)
		require.Error(t, err, "cosign verify refuses the copied signature")
		// With a true signature beside the copied one, only the attestations
		// are wrong: cosign's verify-attestation refuses them too.
		s, err := image.LoadKeySigner(priv, "key.pem")
		require.NoError(t, err)
		_, err = image.SignManifest(ctx, to, s)
		require.NoError(t, err)
		_, err = cosignverify.Verify(ctx, ref, pub)
		require.NoError(t, err)
		_, err = cosignverify.Verify(ctx, ref, pub, cosignTypes...)
		require.ErrorContains(t, err, "cosign verify-attestation")
		_, err = cosignverify.Verify(ctx, res.Image, pub, cosignTypes...)
		require.NoError(t, err, "where they were made they verify")
	})
	t.Run("missing SBOM, unsigned provenance", func(t *testing.T) {
		host := testRegistry(t, false)
		ref := host + "/acme/demo-bundle:v1.0.0"
		pushed, err := image.Build{Kind: image.KindBundle, Dir: bundleDir(t), Push: ref}.Run(ctx)
		require.NoError(t, err)
		d, err := name.NewDigest(pushed.Pushed, name.Insecure)
		require.NoError(t, err)
		s, err := image.LoadKeySigner(priv, "key.pem")
		require.NoError(t, err)
		_, err = image.SignManifest(ctx, d, s)
		require.NoError(t, err)
		h, err := v1.NewHash(d.DigestStr())
		require.NoError(t, err)
		prov, err := image.Provenance(image.KindBundle, bundleDir(t), image.Subject{Name: d.Context().Name(), Digest: h}, testSource, nil)
		require.NoError(t, err)
		_, err = image.Attach(ctx, d, image.ProvenanceArtifactType, prov)
		require.NoError(t, err)
		_, err = verify(t, ref, pub, testSource.Commit)
		var verr *image.VerifyError
		require.ErrorAs(t, err, &verr)
		require.Len(t, verr.Problems, 4, "%v", err)
		require.ErrorContains(t, err, "SBOM: none attached (no referrer of artifact type application/spdx+json)")
		require.ErrorContains(t, err, "SBOM attestation (what `cosign verify-attestation --type spdxjson` reads): none (no sha256-")
		_, err = cosignverify.Verify(ctx, ref, pub)
		require.NoError(t, err, "cosign verify: the image is signed")
		_, err = cosignverify.Verify(ctx, ref, pub, cosignTypes...)
		require.ErrorContains(t, err, "cosign verify-attestation", "but it has no attestations")
		_, err = verify(t, ref, pub, testSource.Commit)
		require.ErrorContains(t, err, "provenance: no attached one is valid")
		require.ErrorContains(t, err, "signature: none (no sha256-")

		// A signed SBOM of another image, attached to this one, is refused.
		otherDigest := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("c", 64)}
		sbom, err := image.SBOM(image.KindBundle, bundleDir(t), image.Subject{Name: d.Context().Name(), Digest: otherDigest}, testSource)
		require.NoError(t, err)
		sd, err := image.Attach(ctx, d, image.SBOMArtifactType, sbom)
		require.NoError(t, err)
		_, err = image.SignManifest(ctx, sd, s)
		require.NoError(t, err)
		_, err = verify(t, ref, pub, testSource.Commit)
		require.ErrorContains(t, err, "SBOM: no attached one is valid")
		require.ErrorContains(t, err, "it describes "+otherDigest.String()+", not "+d.DigestStr())
	})
}

func TestSignRefuses(t *testing.T) {
	ctx := context.Background()
	priv, _ := keyPair(t)
	s, err := image.LoadKeySigner(priv, "key.pem")
	require.NoError(t, err)
	host := testRegistry(t, true)
	dir := bundleDir(t)
	ref := host + "/acme/demo-bundle:v1.0.0"

	_, err = image.Sign{Kind: image.KindBundle, Input: dir, Image: ref, Source: testSource, Signer: s}.Run(ctx)
	require.ErrorContains(t, err, "does not exist: push it first")

	_, err = image.Build{Kind: image.KindBundle, Dir: dir, Push: ref}.Run(ctx)
	require.NoError(t, err)
	writeFiles(t, dir, map[string]string{"manifests/demo.crd.yaml": "kind: CustomResourceDefinition\n# changed\n"})
	_, err = image.Sign{Kind: image.KindBundle, Input: dir, Image: ref, Source: testSource, Signer: s}.Run(ctx)
	require.ErrorContains(t, err, "but "+dir+" builds sha256:")

	_, err = image.Sign{Kind: image.KindBundle, Input: dir, Image: ref, Source: testSource}.Run(ctx)
	require.ErrorContains(t, err, "no signing key")
}

func emptyOCI(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(0, 0)
	require.NoError(t, err)
	return img
}

// TestSignKinds: the catalog and operator images sign and verify too; the
// operator's labels must be the ones it was built with.
func TestSignKinds(t *testing.T) {
	ctx := context.Background()
	priv, pub := keyPair(t)
	s, err := image.LoadKeySigner(priv, "key.pem")
	require.NoError(t, err)
	host := testRegistry(t, false)
	binary := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-trimpath", "-o", binary, "./testdata/withmodules")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	labels := map[string]string{"org.opencontainers.image.revision": testSource.Commit}
	for _, tc := range []struct {
		kind  image.Kind
		input string
	}{{image.KindCatalog, catalogDir(t)}, {image.KindOperator, binary}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			ref := host + "/acme/" + string(tc.kind) + ":v1"
			_, err := image.Build{Kind: tc.kind, Dir: tc.input, Labels: labels, Push: ref}.Run(ctx)
			require.NoError(t, err)
			_, err = image.Sign{Kind: tc.kind, Input: tc.input, Image: ref, Source: testSource, Signer: s}.Run(ctx)
			require.ErrorContains(t, err, "builds sha256:", "without the labels it was built with, the image differs")
			other := testSource
			other.Commit = strings.Repeat("cd", 20)
			_, err = image.Sign{Kind: tc.kind, Input: tc.input, Labels: labels, Image: ref, Source: other, Signer: s}.Run(ctx)
			require.ErrorContains(t, err, `label org.opencontainers.image.revision is "`+testSource.Commit+`", but the commit is `+other.Commit)
			res, err := image.Sign{Kind: tc.kind, Input: tc.input, Labels: labels, Image: ref, Source: testSource, Signer: s}.Run(ctx)
			require.NoError(t, err)
			got, err := verify(t, ref, pub, testSource.Commit)
			require.NoError(t, err)
			require.Equal(t, res.SBOM, got.SBOM)
		})
	}
}
