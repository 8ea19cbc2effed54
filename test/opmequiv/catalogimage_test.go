package opmequiv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	orimage "github.com/operator-framework/operator-registry/pkg/image"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/opmequiv"
	"github.com/inferencestack/inferencestack/test/registry"
)

// TestCatalogImageLoads pushes a catalog image built by image.BuildCatalog and
// reads it back as catalogd and opm do: pull, find the configs folder from
// the image label, unpack, load the file-based catalog. It must be the
// catalog that went in.
func TestCatalogImageLoads(t *testing.T) {
	ctx := context.Background()
	host := registry.Registry(t)
	s := opmequiv.Synthetic{Package: "widgets", Majors: 2, Minors: 3, Patches: 2}
	l, err := s.Write(t.TempDir(), "quay.io/example/{{.Package}}-bundle:v{{.Version}}")
	require.NoError(t, err)
	cfg, err := fbc.Catalog{Template: l.Template, Root: l.Root}.Run(ctx)
	require.NoError(t, err)
	catalogDir := filepath.Join(t.TempDir(), "catalog")
	_, err = fbc.WriteCatalog(*cfg, catalogDir)
	require.NoError(t, err)
	// What the repository's catalog/ also holds.
	require.NoError(t, os.WriteFile(filepath.Join(catalogDir, "widgets", "graph.svg"), []byte("<svg/>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(catalogDir, ".indexignore"), []byte("*.svg\n*.md\n"), 0o644))

	img, err := image.BuildCatalog(catalogDir, image.CatalogOptions{})
	require.NoError(t, err)
	ref := host + "/example/catalog:latest"
	_, err = image.Push(ctx, img, ref)
	require.NoError(t, err)

	reg, err := opmequiv.NewRegistry(t.TempDir(), host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Destroy() })
	r := orimage.SimpleReference(ref)
	require.NoError(t, reg.Pull(ctx, r))
	labels, err := reg.Labels(ctx, r)
	require.NoError(t, err)
	configs := labels[image.ConfigsLabel]
	require.Equal(t, "/configs", configs)
	unpacked := t.TempDir()
	require.NoError(t, reg.Unpack(ctx, r, unpacked))
	loaded, err := declcfg.LoadFS(ctx, os.DirFS(filepath.Join(unpacked, strings.TrimPrefix(configs, "/"))))
	require.NoError(t, err)

	want, err := fbc.Marshal(*cfg)
	require.NoError(t, err)
	got, err := fbc.Marshal(*loaded)
	require.NoError(t, err)
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("catalog read back from the image (-written +read):\n%s", diff)
	}
}
