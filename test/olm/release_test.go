package olm_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/test/olm"
)

func TestReleaseRendersEveryVersion(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	catalog, err := olm.Release{
		Root: filepath.Join("..", ".."),
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

// TestReleaseRemakesTheRepositoryCatalog: without Versions, Release makes
// the repository's own bundles and catalog again, byte for byte; with
// Digests, the bundles name those images by the overridden digest and differ
// in nothing else.
func TestReleaseRemakesTheRepositoryCatalog(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join("..", "..")
	lock, err := release.LoadLock(filepath.Join(root, "channels", "images.lock"))
	require.NoError(t, err)
	const ref = "quay.io/inferencestack/inferencestack-operator:v1.0.0"
	// The bundles name the image by tag while the lock records it as
	// unresolved, by digest once it holds one.
	locked := ref
	if d := lock.Images[ref]; d != release.Unresolved {
		require.NotEmpty(t, d, "the lock has no entry for %s", ref)
		locked = "quay.io/inferencestack/inferencestack-operator@" + d
	}
	built := "sha256:" + strings.Repeat("0", 63) + "1"

	same := t.TempDir()
	_, err = olm.Release{Root: root, Dir: same}.Run(ctx)
	require.NoError(t, err)
	overridden := t.TempDir()
	_, err = olm.Release{Root: root, Dir: overridden, Digests: map[string]string{ref: built}}.Run(ctx)
	require.NoError(t, err)

	compared := 0
	for _, dir := range []string{"bundle", "catalog"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
				return err
			}
			rel, err := filepath.Rel(root, p)
			require.NoError(t, err)
			want, err := os.ReadFile(p)
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(same, rel))
			require.NoError(t, err, "%s is not made again", rel)
			require.True(t, string(want) == string(got), "%s made again differs from the committed file", rel)
			if dir == "bundle" {
				got, err := os.ReadFile(filepath.Join(overridden, rel))
				require.NoError(t, err)
				require.True(t, strings.ReplaceAll(string(want), locked, "quay.io/inferencestack/inferencestack-operator@"+built) == string(got),
					"%s with the digest of %s overridden differs in more than that digest", rel, ref)
			}
			compared++
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, compared, 4)
	csv, err := os.ReadFile(filepath.Join(overridden, "bundle", "inferencestack-operator", "1.0.0", "manifests", "inferencestack-operator.clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(csv), "quay.io/inferencestack/inferencestack-operator@"+built)
}

// TestReleaseEditsTheInputs: Edit changes the release inputs the bundles
// are made from; with Digests the bundles name the new image by digest.
func TestReleaseEditsTheInputs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	digest := "sha256:" + strings.Repeat("0", 63) + "2"
	_, err := olm.Release{
		Root: filepath.Join("..", ".."),
		Dir:  dir,
		Edit: func(in *release.Input) {
			in.Operands["starter"] = "registry.test/standin/llama-stack:" + in.LlamaStackVersion
		},
		Digests: map[string]string{"registry.test/standin/llama-stack:0.2.23": digest, "registry.test/standin/llama-stack:0.3.0": digest,
			"registry.test/standin/llama-stack:0.7.1": digest, "registry.test/standin/llama-stack:0.8.0": digest},
	}.Run(ctx)
	require.NoError(t, err)
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0"} {
		csv, err := os.ReadFile(filepath.Join(dir, "bundle", "inferencestack-operator", v, "manifests", "inferencestack-operator.clusterserviceversion.yaml"))
		require.NoError(t, err)
		require.Contains(t, string(csv), "registry.test/standin/llama-stack@"+digest, "the CSV of %s", v)
		require.NotContains(t, string(csv), "docker.io/llamastack/distribution-starter", "the CSV of %s", v)
		require.NotContains(t, string(csv), "docker.io/ogx/distribution-starter", "the CSV of %s", v)
	}
}
