package graph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/graph"
	"github.com/inferencestack/inferencestack/internal/olmgraph"
)

// huge is a package with one channel of n entries, the worst case for a
// drawing: each entry replaces the one before, skips the 20 before it and
// has a skipRange over every earlier version.
func huge(n int) olmgraph.Package {
	p := olmgraph.Package{Name: "huge", DefaultChannel: "stable"}
	c := olmgraph.Channel{Name: "stable"}
	name := func(i int) string { return fmt.Sprintf("huge.v%d.%d.0", i/1000, i%1000) }
	for i := range n {
		v := semver.MustParse(fmt.Sprintf("%d.%d.0", i/1000, i%1000))
		p.Bundles = append(p.Bundles, olmgraph.Bundle{Name: name(i), Version: v})
		e := olmgraph.Entry{Name: name(i), SkipRange: "<" + v.String()}
		if i > 0 {
			e.Replaces = name(i - 1)
		}
		for j := max(0, i-21); j < i-1; j++ {
			e.Skips = append(e.Skips, name(j))
		}
		c.Entries = append(c.Entries, e)
	}
	p.Channels = []olmgraph.Channel{c}
	return p
}

// TestHugeChannelIsProportional: a channel whose every entry skips many
// versions draws a bounded number of edges per entry (summaries), not one
// per pair of versions, and says what each summary stands for.
func TestHugeChannelIsProportional(t *testing.T) {
	const n = 400
	p := huge(n)
	edges := graph.Edges(p)
	require.LessOrEqual(t, len(edges), 4*n, "edges drawn for %d entries", n)
	last := edges[len(edges)-1]
	require.Equal(t, graph.Edge{FromChannel: "stable", From: "huge.v0.0.0", Channel: "stable", To: "huge.v0.399.0", Kind: olmgraph.SkipRange, Count: 378}, last)
	md := graph.Markdown(p)
	require.Contains(t, md, "|skips: 20 versions from 0.378.0|")
	require.Contains(t, md, "|skipRange: 378 versions from 0.0.0|")
	svg := graph.SVG(p)
	require.Contains(t, svg, "<title>skipRange: 378 versions from 0.0.0</title></path>")
	require.Less(t, strings.Count(svg, "<path"), 4*n)
	// Few skips are still drawn one by one.
	small := graph.Edges(huge(5))
	require.Contains(t, small, graph.Edge{FromChannel: "stable", From: "huge.v0.2.0", Channel: "stable", To: "huge.v0.4.0", Kind: olmgraph.Skips})
}

// BenchmarkGraphHugeChannel draws graph.md and graph.svg of a 20,000-entry
// channel (go test -bench GraphHugeChannel -benchtime 1x ./internal/graph/).
func BenchmarkGraphHugeChannel(b *testing.B) {
	p := huge(20000)
	b.ResetTimer()
	for b.Loop() {
		md, svg := graph.Markdown(p), graph.SVG(p)
		b.ReportMetric(float64(len(md)+len(svg))/(1<<20), "MiB")
	}
}
