package graph_test

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/graph"
	"github.com/inferencestack/inferencestack/internal/olmgraph"
)

var update = flag.Bool("update", false, "rewrite golden files")

func n(v string) string { return "demo.v" + v }

func demo() olmgraph.Package {
	p := olmgraph.Package{Name: "demo", DefaultChannel: "stable-v2"}
	for _, v := range []string{"1.0.0", "1.0.1", "1.1.0", "2.0.0", "2.1.0"} {
		p.Bundles = append(p.Bundles, olmgraph.Bundle{Name: n(v), Version: semver.MustParse(v), Image: "quay.io/demo/bundle:v" + v})
	}
	p.Bundles[0].Deprecated = "1.0.0 has a known upgrade bug"
	p.Channels = []olmgraph.Channel{
		{Name: "candidate-v1", Deprecated: "use stable-v1", Entries: []olmgraph.Entry{{Name: n("1.0.0")}, {Name: n("1.0.1"), Skips: []string{n("1.0.0")}}}},
		{Name: "stable-v1", Entries: []olmgraph.Entry{
			{Name: n("1.0.0")},
			{Name: n("1.0.1"), Skips: []string{n("1.0.0")}},
			{Name: n("1.1.0"), Replaces: n("1.0.1")},
		}},
		{Name: "stable-v2", Entries: []olmgraph.Entry{
			{Name: n("2.0.0"), SkipRange: ">=1.0.0 <2.0.0"},
			{Name: n("2.1.0"), Replaces: n("2.0.0")},
		}},
	}
	return p
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); rerun with -update if intended:\n%s", path, diff)
	}
}

func TestEdges(t *testing.T) {
	edges := graph.Edges(demo())
	require.Contains(t, edges, graph.Edge{FromChannel: "stable-v1", From: n("1.0.1"), Channel: "stable-v1", To: n("1.1.0"), Kind: olmgraph.Replaces})
	require.Contains(t, edges, graph.Edge{FromChannel: "stable-v1", From: n("1.0.0"), Channel: "stable-v1", To: n("1.0.1"), Kind: olmgraph.Skips})
	// The bridge reaches into the lane of the same channel type.
	require.Contains(t, edges, graph.Edge{FromChannel: "stable-v1", From: n("1.1.0"), Channel: "stable-v2", To: n("2.0.0"), Kind: olmgraph.SkipRange})
	require.Contains(t, edges, graph.Edge{FromChannel: "stable-v1", From: n("1.0.0"), Channel: "stable-v2", To: n("2.0.0"), Kind: olmgraph.SkipRange})
}

func TestGolden(t *testing.T) {
	p := demo()
	md := graph.Markdown(p)
	svg := graph.SVG(p)
	golden(t, "testdata/demo/golden/graph.md", md)
	golden(t, "testdata/demo/golden/graph.svg", svg)

	require.Contains(t, md, "(deprecated)")
	require.Contains(t, md, "stable-v2 (default)")
	require.Contains(t, svg, ">deprecated</text>")
	require.NotContains(t, svg, "http://www.w3.org/1999/xlink", "self-contained: no links")
	require.Equal(t, 1, strings.Count(svg, "http"), "only the SVG namespace may be a URL")

	// Well-formed XML.
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
}

// TestRun draws the graphs of testdata/catalog, a copy of the catalog
// internal/fbc renders from its test bundles (its golden file).
func TestRun(t *testing.T) {
	out := t.TempDir()
	paths, err := graph.Graph{CatalogDir: "testdata/catalog", OutDir: out}.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{
		filepath.Join(out, ".indexignore"),
		filepath.Join(out, "demo-operator", "graph.md"),
		filepath.Join(out, "demo-operator", "graph.svg"),
	}, paths)
	md, err := os.ReadFile(paths[1])
	require.NoError(t, err)
	require.Contains(t, string(md), "skipRange")

	_, err = graph.Graph{CatalogDir: "testdata/catalog", OutDir: out, Packages: []string{"nope"}}.Run(context.Background())
	require.ErrorContains(t, err, `no package "nope"`)
}
