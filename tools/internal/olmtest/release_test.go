package olmtest_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/tools/internal/fbc"
	"github.com/inferencestack/inferencestack/tools/internal/olmtest"
)

func TestReleaseRendersEveryVersion(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	catalog, err := olmtest.Release{
		Root: filepath.Join("..", "..", ".."),
		Dir:  dir,
		Versions: map[string][]string{
			"inferencestack-crds":     {"1.0.0", "2.0.0"},
			"inferencestack-operator": {"1.0.0", "1.1.0", "2.0.0"},
		},
	}.Run(ctx)
	require.NoError(t, err)
	pkgs, err := fbc.Load(ctx, catalog)
	require.NoError(t, err)
	got := map[string][]string{}
	for _, p := range pkgs {
		for _, b := range p.Bundles {
			got[p.Name] = append(got[p.Name], b.Version.String())
		}
		slices.Sort(got[p.Name])
	}
	require.Equal(t, map[string][]string{
		"inferencestack-crds":     {"1.0.0", "2.0.0"},
		"inferencestack-operator": {"1.0.0", "1.1.0", "2.0.0"},
	}, got)
	require.DirExists(t, filepath.Join(dir, "bundle", "inferencestack-operator", "2.0.0", "manifests"))
}
