package fbc_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/fbc"
)

func TestCatalogsRun(t *testing.T) {
	root, err := filepath.Abs("testdata")
	require.NoError(t, err)
	channels := t.TempDir()
	for _, f := range []string{"demo-operator.semver.yaml", "demo-operator.release.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "channels", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(channels, f), data, 0o644))
	}
	out := filepath.Join(t.TempDir(), "catalog")

	paths, err := fbc.Catalogs{ChannelsDir: channels, Root: root, OutDir: out}.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(out, "demo-operator", "catalog.yaml")}, paths)
	got, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/golden/demo-operator/catalog.yaml")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))

	// A second package that fails to render: nothing is written, the old
	// catalog stays as it was.
	require.NoError(t, os.WriteFile(filepath.Join(channels, "broken.semver.yaml"),
		[]byte("schema: olm.semver\nstable:\n  bundles:\n  - image: bundle/broken/1.0.0\n"), 0o644))
	require.NoError(t, os.Remove(paths[0]))
	_, err = fbc.Catalogs{ChannelsDir: channels, Root: root, OutDir: out}.Run(context.Background())
	require.ErrorContains(t, err, `bundle "bundle/broken/1.0.0"`)
	require.NoFileExists(t, paths[0])

	// A file named for another package than it renders is refused.
	require.NoError(t, os.Rename(filepath.Join(channels, "demo-operator.semver.yaml"), filepath.Join(channels, "other.semver.yaml")))
	// Catalog extras without their template are refused, not ignored.
	_, err = fbc.Catalogs{ChannelsDir: channels, Root: root, OutDir: out, Packages: []string{"other"}}.Run(context.Background())
	require.ErrorContains(t, err, filepath.Join(channels, "demo-operator.release.yaml")+" has no semver template "+filepath.Join(channels, "demo-operator.semver.yaml"))
	require.NoError(t, os.Rename(filepath.Join(channels, "demo-operator.release.yaml"), filepath.Join(channels, "other.release.yaml")))
	_, err = fbc.Catalogs{ChannelsDir: channels, Root: root, OutDir: out, Packages: []string{"other"}}.Run(context.Background())
	require.ErrorContains(t, err, `renders package "demo-operator"`)

	_, err = fbc.Catalogs{ChannelsDir: t.TempDir(), Root: root, OutDir: out}.Run(context.Background())
	require.ErrorContains(t, err, "no *.semver.yaml templates")
}
