package opmequiv_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/test/opmequiv"
	"github.com/inferencestack/inferencestack/test/registry"
)

// TestDirectoryRenderEqualsOPM renders a package of bundle directories with
// bundlegen's directory render (fbc.Catalog) and with opm's own code path
// against the same bundles pushed as images to an in-process registry: the
// catalog.yaml bundlegen writes must be byte for byte what opm's writer
// (declcfg.WriteYAML) writes, with nothing added (its provenance lives in
// catalog/README.md, not in the rendered file).
func TestDirectoryRenderEqualsOPM(t *testing.T) {
	ctx := context.Background()
	host := registry.Registry(t)
	s := opmequiv.Synthetic{Package: "widgets", Majors: 2, Minors: 5, Patches: 3}
	l, err := s.Write(t.TempDir(), host+"/example/{{.Package}}-bundle:v{{.Version}}")
	require.NoError(t, err)
	require.NoError(t, opmequiv.PushBundles(ctx, l.Dirs, l.Refs))
	imageTemplate, err := l.ImageTemplate()
	require.NoError(t, err)

	fromImages, err := opmequiv.RenderWithOPM(ctx, imageTemplate, t.TempDir(), host)
	require.NoError(t, err)
	fromDirs, err := fbc.Catalog{Template: l.Template, Root: l.Root}.Run(ctx)
	require.NoError(t, err)

	require.Len(t, fromImages.Bundles, len(l.Dirs))
	require.Len(t, fromImages.Channels, 2+5) // stable-v1, stable-v2 and five minor channels
	var opm bytes.Buffer
	require.NoError(t, declcfg.WriteYAML(*fromImages, &opm))
	path, err := fbc.WriteCatalog(*fromDirs, t.TempDir())
	require.NoError(t, err)
	written, err := os.ReadFile(path)
	require.NoError(t, err)
	if diff := cmp.Diff(opm.String(), string(written)); diff != "" {
		t.Fatalf("opm (images) and bundlegen (directories) differ (-opm +bundlegen):\n%s", diff)
	}

	// The test can fail: a bundle that differs changes the catalog.
	fromDirs.Bundles[0].Properties = fromDirs.Bundles[0].Properties[1:]
	changed, err := fbc.Marshal(*fromDirs)
	require.NoError(t, err)
	require.NotEqual(t, opm.String(), string(changed))
}
