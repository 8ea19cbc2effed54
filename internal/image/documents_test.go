package image_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/image"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestDocumentsGolden pins the bytes of a bundle's SBOM and provenance: the
// same input and commit give these bytes on any machine and Go version.
// `go test ./internal/image -run TestDocumentsGolden -update` rewrites them.
func TestDocumentsGolden(t *testing.T) {
	in := filepath.Join("testdata", "documents", "bundle", "in")
	golden := filepath.Join("testdata", "documents", "bundle", "golden")
	subject := image.Subject{Name: "quay.io/acme/demo-bundle", Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("c", 64)}}
	sbom, err := image.SBOM(image.KindBundle, in, subject, testSource)
	require.NoError(t, err)
	prov, err := image.Provenance(image.KindBundle, in, subject, testSource, []string{"bundlegen", "image", "bundle", "bundle/demo/1.0.0"})
	require.NoError(t, err)
	for name, got := range map[string][]byte{"sbom.spdx.json": sbom, "provenance.intoto.json": prov} {
		file := filepath.Join(golden, name)
		if *update {
			require.NoError(t, os.WriteFile(file, got, 0o644))
		}
		want, err := os.ReadFile(file)
		require.NoError(t, err, "run with -update to write it")
		require.Empty(t, cmp.Diff(string(want), string(got)), "%s differs from what the input gives (run with -update after a deliberate change)", file)
	}
}
