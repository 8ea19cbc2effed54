//go:build e2e

package e2e_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/cosignverify"
	"github.com/inferencestack/inferencestack/test/olm"
)

// TestUnverifiedImagesAreRefused: the check every image PushRelease pushes
// passes before a ClusterCatalog names it (what an admission policy
// verifying cosign signatures does before a pull), on the cluster's
// registry, refuses a layer changed after signing, a signature by another
// key and an image signed without its SBOM and provenance; cosign's own
// library (what sigstore policy-controller and Kyverno verify with) refuses
// each too. (Every other test of this package installs only images that
// passed both.)
func TestUnverifiedImagesAreRefused(t *testing.T) {
	ctx := context.Background()
	bundleRoot, _ := releaseCatalog(t)
	signed := filepath.Join(bundleRoot, bundle.PackageOperator, "1.0.0")
	other := filepath.Join(bundleRoot, bundle.PackageCRDs, "1.0.0")
	push := func(dir, ref string) string {
		t.Helper()
		img, err := image.BuildBundle(dir)
		require.NoError(t, err)
		d, err := image.Push(ctx, img, ref)
		require.NoError(t, err)
		return d.String()
	}

	ref := cluster.Registry + "/inferencestack/refused-bundle:v1.0.0"
	push(signed, ref)
	require.NoError(t, cluster.Signing.Sign(ctx, image.KindBundle, signed, ref))
	require.NoError(t, cluster.Signing.Verify(ctx, ref), "signed with its SBOM and provenance")
	byCosign, err := cosignverify.Verify(ctx, ref, cluster.Signing.PublicKey, cosignverify.Types...)
	require.NoError(t, err, "cosign verify and verify-attestation --type spdxjson|slsaprovenance1")
	require.Equal(t, 1, byCosign.Signatures)
	cosignRefuses := func(ref string, types ...string) {
		t.Helper()
		_, err := cosignverify.Verify(ctx, ref, cluster.Signing.PublicKey, types...)
		require.Error(t, err, "cosign accepts what bundlegen verify refuses")
		t.Logf("cosign: %v", err)
	}

	// A changed layer: another image under the signed tag.
	push(other, ref)
	err = cluster.Signing.Verify(ctx, ref)
	var verr *image.VerifyError
	require.ErrorAs(t, err, &verr, "a layer changed after signing")
	require.Contains(t, err.Error(), "image signature")
	t.Logf("a changed layer: %v", err)
	cosignRefuses(ref)

	// Signed by another key (SBOM and provenance too).
	stranger, err := olm.NewSigning()
	require.NoError(t, err)
	require.NoError(t, stranger.Sign(ctx, image.KindBundle, other, ref))
	require.NoError(t, stranger.Verify(ctx, ref), "the stranger's own key verifies it")
	err = cluster.Signing.Verify(ctx, ref)
	require.ErrorAs(t, err, &verr, "signed by another key")
	require.Contains(t, err.Error(), "image signature")
	t.Logf("another key: %v", err)
	cosignRefuses(ref)
	cosignRefuses(ref, cosignverify.Types...)

	// Signed, but without its SBOM and provenance.
	bare := cluster.Registry + "/inferencestack/refused-bare-bundle:v1.0.0"
	digest := push(signed, bare)
	d, err := image.ParseReference(digest)
	require.NoError(t, err)
	_, err = image.SignManifest(ctx, d.Context().Digest(d.Identifier()), cluster.Signing.Signer)
	require.NoError(t, err)
	err = cluster.Signing.Verify(ctx, bare)
	require.ErrorAs(t, err, &verr, "no SBOM")
	require.NotContains(t, err.Error(), "image signature", "the image itself is signed")
	require.Contains(t, err.Error(), "SBOM")
	require.Contains(t, err.Error(), "provenance")
	require.Contains(t, err.Error(), "attestation")
	t.Logf("no SBOM or provenance: %v", err)
	_, err = cosignverify.Verify(ctx, bare, cluster.Signing.PublicKey)
	require.NoError(t, err, "cosign verify: the image itself is signed")
	for _, typ := range cosignverify.Types {
		cosignRefuses(bare, typ)
	}
}
