package opmequiv_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/olmgraph"
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
		if root == filepath.Join("..", "..") {
			checkCommittedCatalog(ctx, t, host, root, path, tmpl)
		}
	})
}

// checkCommittedCatalog: the committed catalog/<package>/catalog.yaml is
// byte for byte what opm renders from the same template over the same
// bundles pushed under their published references (those the catalog
// extras name; their registry is served by the test's registry at host),
// once the extras' own additions (default channel, bridges, deprecations;
// none in this repository) are applied: no header, no other byte of
// bundlegen's.
func checkCommittedCatalog(ctx context.Context, t *testing.T, host, root, path string, tmpl fbc.Template) {
	t.Helper()
	extras, err := fbc.ReadExtras(fbc.ExtrasPath(path))
	require.NoError(t, err)
	render, err := fbc.DirRenderer(root, extras.ImageRefTemplate)
	require.NoError(t, err)
	imageOf := map[string]string{}
	var dirs, refs, mirrored []string
	for _, ref := range tmpl.Refs() {
		cfg, err := render(ctx, ref)
		require.NoError(t, err)
		image := cfg.Bundles[0].Image
		v, err := olmgraph.BundleVersion(cfg.Bundles[0])
		require.NoError(t, err)
		if pin, ok := extras.Images[v.String()]; ok {
			image = pin
		}
		imageOf[ref] = image
		registry, repo, ok := strings.Cut(image, "/")
		require.True(t, ok, "published image %s names no registry", image)
		dirs = append(dirs, filepath.Join(root, ref))
		refs = append(refs, host+"/"+repo)
		if !slices.Contains(mirrored, registry) {
			mirrored = append(mirrored, registry)
		}
	}
	require.NoError(t, opmequiv.PushBundles(ctx, dirs, refs))
	published, err := tmpl.MapRefs(func(ref string) (string, error) { return imageOf[ref], nil })
	require.NoError(t, err)
	data, err := published.Marshal()
	require.NoError(t, err)
	fromOPM, err := opmequiv.RenderWithOPM(ctx, data, t.TempDir(), host, mirrored...)
	require.NoError(t, err)
	require.NoError(t, extras.Apply(fromOPM))
	fbc.Sort(fromOPM)
	var opm bytes.Buffer
	require.NoError(t, declcfg.WriteYAML(*fromOPM, &opm))

	pkg := strings.TrimSuffix(filepath.Base(path), fbc.TemplateSuffix)
	committedPath := filepath.Join(root, "catalog", pkg, fbc.CatalogFile)
	committed, err := os.ReadFile(committedPath)
	require.NoError(t, err, "the repository commits %s (make catalog)", committedPath)
	if diff := cmp.Diff(opm.String(), string(committed)); diff != "" {
		t.Fatalf("%s is not opm's render of %s (-opm +committed); run `make catalog` and keep provenance out of the file (catalog/README.md):\n%s",
			committedPath, path, diff)
	}
}
