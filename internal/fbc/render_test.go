package fbc_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/operator-framework/operator-registry/alpha/declcfg"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/olmgraph"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestCatalogRunGolden(t *testing.T) {
	cfg, err := fbc.Catalog{
		Template: "testdata/channels/demo-operator.semver.yaml",
		Root:     "testdata",
	}.Run(context.Background())
	require.NoError(t, err)

	out := t.TempDir()
	path, err := fbc.WriteCatalog(*cfg, out)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(out, "demo-operator", "catalog.yaml"), path)
	got, err := os.ReadFile(path)
	require.NoError(t, err)

	golden := "testdata/golden/demo-operator/catalog.yaml"
	if *update {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("catalog differs from %s (-want +got); rerun with -update if intended:\n%s", golden, diff)
	}

	// A second render is byte-identical.
	cfg2, err := fbc.Catalog{Template: "testdata/channels/demo-operator.semver.yaml", Root: "testdata"}.Run(context.Background())
	require.NoError(t, err)
	again, err := fbc.MarshalCatalog(*cfg2)
	require.NoError(t, err)
	require.True(t, bytes.Equal(got, again), "render is not deterministic")

	graphs, err := olmgraph.Graphs(*cfg)
	require.NoError(t, err)
	require.Len(t, graphs, 1)
	p := graphs[0]
	require.Equal(t, "stable-v2", p.DefaultChannel)
	ch, ok := p.Channel("stable-v2")
	require.True(t, ok)
	require.Equal(t, ">=1.0.0 <2.0.0", ch.Entries[0].SkipRange)
	b, ok := p.Bundle("demo-operator.v1.0.0")
	require.True(t, ok)
	require.NotEmpty(t, b.Deprecated)
	c1, _ := p.Channel("candidate-v1")
	require.NotEmpty(t, c1.Deprecated)
}

func TestCatalogRunErrors(t *testing.T) {
	tests := []struct {
		name    string
		release string
		want    string
	}{
		{name: "unknown default channel", release: "defaultChannel: nope\n", want: `no channel "nope"`},
		{name: "bridge to missing version", release: "bridges:\n- bundle: 3.0.0\n  skipRange: \">=2.0.0 <3.0.0\"\n", want: `no bundle with version "3.0.0"`},
		{name: "image pin for missing version", release: "images:\n  9.0.0: quay.io/x@sha256:" + strings.Repeat("1", 64) + "\n", want: `images: package "demo-operator" has no bundle with version "9.0.0"`},
		{name: "image pin that is not an image", release: "images:\n  1.1.0: quay.io/x@sha256:00\n", want: `images["1.1.0"]: image reference "quay.io/x@sha256:00" does not parse`},
		{name: "empty image pin", release: "images:\n  1.1.0: \"\"\n", want: `images["1.1.0"]: image reference is empty`},
		{name: "image template that makes no image", release: "imageRefTemplate: \"quay.io/x/{{.Package}}:v {{.Version}}\"\n", want: `imageRefTemplate: for package inferencestack-operator version 1.0.0 it makes image reference "quay.io/x/inferencestack-operator:v 1.0.0"`},
		{name: "downgrade bridge", release: "bridges:\n- bundle: 1.0.0\n  skipRange: \">=2.0.0 <3.0.0\"\n",
			want: `bridges[0].skipRange (bundle 1.0.0, skipRange ">=2.0.0 <3.0.0"): the range admits 2.0.0, which is not below the bundle`},
		{name: "bridge that admits its own bundle", release: "bridges:\n- bundle: 2.0.0\n  skipRange: \">=1.0.0 <=2.0.0\"\n",
			want: `bridges[0].skipRange (bundle 2.0.0, skipRange ">=1.0.0 <=2.0.0"): the range admits 2.0.0`},
		{name: "bridge open above", release: "bridges:\n- bundle: 2.0.0\n  skipRange: \">=1.0.0\"\n",
			want: `bridges[0].skipRange (bundle 2.0.0, skipRange ">=1.0.0"): the range admits 2.0.0`},
		{name: "bridge to a future version", release: "bridges:\n- bundle: 2.0.0\n  skipRange: \">=1.0.0 <2.0.0 || >=9.0.0\"\n",
			want: `bridges[0].skipRange (bundle 2.0.0, skipRange ">=1.0.0 <2.0.0 || >=9.0.0"): the range admits 9.0.0, which is not below the bundle`},
		{name: "second bridge downgrades", release: "bridges:\n- bundle: 2.0.0\n  skipRange: \">=1.0.0 <2.0.0\"\n- bundle: 1.1.0\n  skipRange: \">=2.1.0 <2.2.0\"\n",
			want: `bridges[1].skipRange (bundle 1.1.0, skipRange ">=2.1.0 <2.2.0"): the range admits 2.1.0`},
		{name: "bridge from a later major", release: "bridges:\n- bundle: 2.0.0\n  skipRange: \">=7.0.0 <8.0.0\"\n",
			want: `bridges[0].skipRange (bundle 2.0.0, skipRange ">=7.0.0 <8.0.0"): the range admits 7.0.0, which is not below the bundle: OLM would offer 2.0.0 as an upgrade from 7.0.0, a downgrade`},
		{name: "bridge that admits no older version", release: "bridges:\n- bundle: 2.0.0\n  skipRange: \">=0.1.0 <0.2.0\"\n",
			want: `bridges[0].skipRange: ">=0.1.0 <0.2.0" admits no version of package "demo-operator" below the bundle 2.0.0 (versions below it: [1.0.0 1.0.1 1.1.0]), so the bridge adds no upgrade edge`},
		{name: "bad skipRange", release: "bridges:\n- bundle: 2.0.0\n  skipRange: \"banana\"\n", want: "not a valid range"},
		{name: "deprecate missing channel", release: "deprecations:\n  channels:\n    fast-v9: gone\n", want: `no channel "fast-v9"`},
		{name: "unknown field", release: "defaultChanel: stable-v1\n", want: "unknown field"},
		{name: "bad image template", release: "imageRefTemplate: \"{{.Tag}}\"\n", want: "imageRefTemplate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rel := filepath.Join(t.TempDir(), "demo-operator.release.yaml")
			require.NoError(t, os.WriteFile(rel, []byte(tc.release), 0o644))
			_, err := fbc.Catalog{Template: "testdata/channels/demo-operator.semver.yaml", Extras: rel, Root: "testdata"}.Run(context.Background())
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, rel)
		})
	}
}

func TestTemplateMapRefs(t *testing.T) {
	data, err := os.ReadFile("testdata/channels/demo-operator.semver.yaml")
	require.NoError(t, err)
	tmpl, err := fbc.ParseTemplate(data)
	require.NoError(t, err)
	require.Len(t, tmpl.Refs(), 5)
	mapped, err := tmpl.MapRefs(func(ref string) (string, error) { return "registry.test/" + filepath.Base(ref), nil })
	require.NoError(t, err)
	require.Equal(t, "registry.test/1.0.0", mapped.Stable.Bundles[0].Image)
	require.Equal(t, "bundle/demo-operator/1.0.0", tmpl.Stable.Bundles[0].Image, "MapRefs must not change the original")
}

func TestPinnedImages(t *testing.T) {
	rel := filepath.Join(t.TempDir(), "demo-operator.release.yaml")
	digest := "quay.io/inferencestack/demo-operator-bundle@sha256:" + strings.Repeat("1", 64)
	require.NoError(t, os.WriteFile(rel, []byte("images:\n  1.1.0: "+digest+"\n"), 0o644))
	cfg, err := fbc.Catalog{Template: "testdata/channels/demo-operator.semver.yaml", Extras: rel, Root: "testdata"}.Run(context.Background())
	require.NoError(t, err)
	images := map[string]string{}
	for _, b := range cfg.Bundles {
		images[b.Name] = b.Image
	}
	require.Equal(t, digest, images["demo-operator.v1.1.0"])
	require.Equal(t, "quay.io/inferencestack/demo-operator-bundle:v1.0.0", images["demo-operator.v1.0.0"])
	for _, b := range cfg.Bundles {
		if b.Name == "demo-operator.v1.1.0" {
			require.Contains(t, b.RelatedImages, declcfg.RelatedImage{Image: digest})
		}
	}
}
