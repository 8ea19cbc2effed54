package validate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/validate"
)

// TestCatalogImagesByTag: bundle and related images named by tag are
// warnings, and findings under --require-digests; digests pass both.
func TestCatalogImagesByTag(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("e", 64)
	catalog := func(bundleImage, related string) string {
		return "schema: olm.package\nname: demo\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: demo\nname: stable\nentries:\n- name: demo.v1.0.0\n---\n" +
			"schema: olm.bundle\npackage: demo\nname: demo.v1.0.0\nimage: " + bundleImage + "\nrelatedImages:\n- name: operand-starter\n  image: " + related +
			"\nproperties:\n- type: olm.package\n  value:\n    packageName: demo\n    version: 1.0.0\n"
	}
	tests := []struct {
		name          string
		yaml          string
		warnings      []string
		requireErrors []string
	}{
		{name: "all by digest", yaml: catalog("quay.io/x/b"+digest, "docker.io/llamastack/distribution-starter"+digest)},
		{name: "bundle and operand by tag", yaml: catalog("quay.io/x/b:v1.0.0", "docker.io/llamastack/distribution-starter:0.3.0"),
			warnings: []string{
				`warning: package "demo", channel "stable", bundle "demo.v1.0.0": bundle image "quay.io/x/b:v1.0.0" is not pinned by digest`,
				`warning: package "demo", channel "stable", bundle "demo.v1.0.0": related image "docker.io/llamastack/distribution-starter:0.3.0" (operand-starter) is not pinned by digest`,
			},
			requireErrors: []string{`bundle image "quay.io/x/b:v1.0.0"`, `related image "docker.io/llamastack/distribution-starter:0.3.0"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "demo"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "demo", "catalog.yaml"), []byte(tc.yaml), 0o644))
			var warnings strings.Builder
			findings, err := validate.Catalog{Dir: dir, Warnings: &warnings}.Run(context.Background())
			require.NoError(t, err)
			require.Empty(t, findings)
			for _, w := range tc.warnings {
				require.Contains(t, warnings.String(), w)
			}
			require.Equal(t, len(tc.warnings), strings.Count(warnings.String(), "warning: "))

			findings, err = validate.Catalog{Dir: dir, RequireDigests: true}.Run(context.Background())
			require.NoError(t, err)
			require.Len(t, findings, len(tc.requireErrors))
			for i, w := range tc.requireErrors {
				require.Equal(t, validate.RuleImageNotDigest, findings[i].Rule)
				require.Contains(t, findings[i].Message, w)
			}
		})
	}
}

// TestCatalogLeftovers: a catalog that a bundlegen run is writing (or was
// stopped while writing) is refused, naming its journal, rather than read
// half old and half new.
func TestCatalogLeftovers(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "demo"), 0o755))
	data := []byte("schema: olm.package\nname: demo\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "demo", "catalog.yaml"), data, 0o644))
	var during error
	ctx := atomicfs.WithHook(context.Background(), func(_, step string) {
		if step == atomicfs.StepRename && during == nil {
			_, during = validate.Catalog{Dir: dir}.Run(context.Background())
		}
	})
	tx, err := atomicfs.Begin(ctx, dir)
	require.NoError(t, err)
	tx.Write(filepath.Join(dir, "demo", "catalog.yaml"), []byte("schema: olm.package\nname: demo\ndescription: x\n"))
	require.NoError(t, tx.Commit())
	tx.Close()
	require.ErrorContains(t, during, dir+" was being written by a bundlegen run that was stopped, or is being written now (its journal "+filepath.Join(dir, ".bundlegen", "journal"))
	_, err = validate.Catalog{Dir: dir}.Run(context.Background())
	require.NoError(t, err, "once the write is done")
}
