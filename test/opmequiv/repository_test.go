package opmequiv_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/test/opmequiv"
	"github.com/inferencestack/inferencestack/test/registry"
)

// TestRepositoryTemplatesEqualOPM does for the repository's own
// channels/<package>.semver.yaml and bundle/ directories (and for the demo
// repository in testdata) what
// TestDirectoryRenderEqualsOPM does for a synthetic package: the semver
// template rendered over the directories equals opm's render of the same
// bundles as images. (Catalog extras from <package>.release.yaml are
// bundlegen's own and not part of the comparison.)
func TestRepositoryTemplatesEqualOPM(t *testing.T) {
	ctx := context.Background()
	host := registry.Registry(t)
	for _, root := range []string{filepath.Join("..", ".."), "testdata"} {
		templates, err := filepath.Glob(filepath.Join(root, "channels", "*.semver.yaml"))
		require.NoError(t, err)
		for _, path := range templates {
			testTemplate(ctx, t, host, root, path)
		}
	}
}

func testTemplate(ctx context.Context, t *testing.T, host, root, path string) {
	t.Run(path, func(t *testing.T) {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		tmpl, err := fbc.ParseTemplate(data)
		require.NoError(t, err)
		for _, ref := range tmpl.Refs() {
			if _, err := os.Stat(filepath.Join(root, ref)); err != nil {
				t.Fatalf("%s lists %s, which is not in this checkout: bundles are committed; `make release` makes them", path, ref)
			}
		}
		render, err := fbc.DirRenderer(root, host+"/inferencestack/{{.Package}}-bundle:v{{.Version}}")
		require.NoError(t, err)

		// Push each bundle directory under the image reference its render names.
		imageOf := map[string]string{}
		var dirs, refs []string
		for _, ref := range tmpl.Refs() {
			cfg, err := render(ctx, ref)
			require.NoError(t, err)
			imageOf[ref] = cfg.Bundles[0].Image
			dirs = append(dirs, filepath.Join(root, ref))
			refs = append(refs, cfg.Bundles[0].Image)
		}
		require.NoError(t, opmequiv.PushBundles(ctx, dirs, refs))
		imageTmpl, err := tmpl.MapRefs(func(ref string) (string, error) { return imageOf[ref], nil })
		require.NoError(t, err)
		imageData, err := imageTmpl.Marshal()
		require.NoError(t, err)

		fromImages, err := opmequiv.RenderWithOPM(ctx, imageData, t.TempDir(), host)
		require.NoError(t, err)
		fromDirs, err := fbc.RenderTemplate(ctx, bytes.NewReader(data), render)
		require.NoError(t, err)
		opmYAML, err := fbc.Marshal(*fromImages)
		require.NoError(t, err)
		dirYAML, err := fbc.Marshal(*fromDirs)
		require.NoError(t, err)
		if diff := cmp.Diff(string(opmYAML), string(dirYAML)); diff != "" {
			t.Fatalf("%s: opm (images) and bundlegen (directories) differ (-opm +bundlegen):\n%s", path, diff)
		}
	})
}
