package opmequiv_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/tools/internal/image/imagetest"
	"github.com/inferencestack/inferencestack/tools/internal/opmequiv"
)

// TestDirectoryRenderEqualsOPM renders a package of bundle directories with
// bundlegen's directory render and with opm's own image code path against the
// same bundles pushed to an in-process registry: the catalogs must be equal.
func TestDirectoryRenderEqualsOPM(t *testing.T) {
	ctx := context.Background()
	host := imagetest.Registry(t)
	s := opmequiv.Synthetic{Package: "widgets", Majors: 2, Minors: 5, Patches: 3}
	dirs, err := s.Write(t.TempDir())
	require.NoError(t, err)

	refTemplate := host + "/example/{{.Package}}-bundle:v{{.Version}}"
	imageRef := func(v semver.Version) string { return fmt.Sprintf("%s/example/%s-bundle:v%s", host, s.Package, v) }
	var refs []string
	for _, v := range s.Versions() {
		refs = append(refs, imageRef(v))
	}
	require.NoError(t, opmequiv.PushBundles(ctx, dirs, refs))
	tmpl := s.Template(imageRef)

	fromImages, err := opmequiv.RenderWithOPM(ctx, tmpl, t.TempDir(), host)
	require.NoError(t, err)
	fromDirs, err := renderDirs(ctx, tmpl, dirs, refTemplate)
	require.NoError(t, err)

	require.Len(t, fromImages.Bundles, len(dirs))
	// Compare what opm prints: declcfg.WriteYAML orders bundles and channels
	// (the template itself renders bundles in map order).
	opmYAML, dirYAML := writeYAML(t, fromImages), writeYAML(t, fromDirs)
	if diff := cmp.Diff(opmYAML, dirYAML); diff != "" {
		t.Fatalf("opm (images) and bundlegen (directories) differ (-opm +bundlegen):\n%s", diff)
	}
	// The test can fail: a different bundle changes the render.
	fromDirs.Bundles[0].Properties = fromDirs.Bundles[0].Properties[1:]
	require.NotEqual(t, opmYAML, writeYAML(t, fromDirs))
}

func writeYAML(t *testing.T, cfg *declcfg.DeclarativeConfig) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, declcfg.WriteYAML(*cfg, &buf))
	return buf.String()
}
