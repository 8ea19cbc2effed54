// Package graph draws a package's upgrade graph from its catalog: Mermaid
// text (graph.md, rendered by code review tools) and a self-contained SVG
// (graph.svg, no external renderer or fonts), one lane per channel, bundles
// in version order, deprecated bundles and channels marked.
package graph

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inferencestack/inferencestack/tools/internal/atomicfs"
	"github.com/inferencestack/inferencestack/tools/internal/fbc"
	"github.com/inferencestack/inferencestack/tools/internal/olmgraph"
)

// Files written per package under catalog/<package>/ (and the root .indexignore).
const (
	MarkdownFile = "graph.md"
	SVGFile      = "graph.svg"
	// IndexIgnoreFile, at the catalog root, keeps the graph files out of the
	// catalog: operator-registry and catalogd parse every other file as FBC.
	IndexIgnoreFile = ".indexignore"
)

const indexIgnore = "*.svg\n*.md\n"

// Graph writes graph.md and graph.svg for every package of a catalog.
type Graph struct {
	// CatalogDir is the catalog root (e.g. catalog/).
	CatalogDir string
	// OutDir receives <package>/graph.{md,svg}; empty means CatalogDir.
	OutDir string
	// Packages limits the output to these packages; empty means all.
	Packages []string
}

// Run loads the catalog and writes the files atomically, returning their paths.
func (g Graph) Run(ctx context.Context) ([]string, error) {
	pkgs, err := fbc.Load(ctx, g.CatalogDir)
	if err != nil {
		return nil, err
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("catalog %s has no package (olm.package), so there is no graph to draw: "+
			"give the catalog's root directory with --catalog (catalog/, written by `bundlegen catalog`)", g.CatalogDir)
	}
	out := g.OutDir
	if out == "" {
		out = g.CatalogDir
	}
	var written []string
	for _, want := range g.Packages {
		if !slices.ContainsFunc(pkgs, func(p olmgraph.Package) bool { return p.Name == want }) {
			return nil, fmt.Errorf("catalog %s has no package %q", g.CatalogDir, want)
		}
	}
	for _, p := range pkgs {
		if len(g.Packages) > 0 && !slices.Contains(g.Packages, p.Name) {
			continue
		}
		for name, data := range map[string]string{MarkdownFile: Markdown(p), SVGFile: SVG(p)} {
			path := filepath.Join(out, p.Name, name)
			if err := atomicfs.WriteFile(ctx, path, []byte(data)); err != nil {
				return nil, err
			}
			written = append(written, path)
		}
	}
	if len(written) > 0 {
		path := filepath.Join(out, IndexIgnoreFile)
		if err := atomicfs.WriteFile(ctx, path, []byte(indexIgnore)); err != nil {
			return nil, err
		}
		written = append(written, path)
	}
	slices.Sort(written)
	return written, nil
}

// Edge is an upgrade edge drawn from an older bundle to the bundle that
// accepts upgrades from it. FromChannel differs from Channel only for a
// skipRange that reaches into another channel (a cross-major bridge).
type Edge struct {
	FromChannel, From string
	Channel, To       string
	Kind              olmgraph.Kind
}

// Edges lists the drawable edges of a package, in a stable order: the
// package's upgrade edges (olmgraph.Package.Edges), one per pair of bundles
// and channel, of the first kind that holds (replaces, skips, skipRange). A
// replaces or skips edge is drawn within its channel only. A skipRange edge
// comes from every bundle of the package in the range: from the same channel
// when the bundle is in it, else from a channel of the same type (stable-v1
// for stable-v2), else from the first channel that holds it.
func Edges(p olmgraph.Package) []Edge {
	var out []Edge
	type pair struct{ channel, from, to string }
	seen := map[pair]bool{}
	for _, e := range p.Edges() {
		k := pair{e.Channel, e.From, e.To}
		if seen[k] {
			continue
		}
		seen[k] = true
		c, _ := p.Channel(e.Channel)
		from := ""
		if slices.ContainsFunc(c.Entries, func(x olmgraph.Entry) bool { return x.Name == e.From }) {
			from = c.Name
		} else if e.Kind == olmgraph.SkipRange {
			from = sourceChannel(p, c.Name, e.From)
		}
		if from != "" {
			out = append(out, Edge{from, e.From, c.Name, e.To, e.Kind})
		}
	}
	return out
}

// sourceChannel picks the lane a cross-channel edge starts from: a channel
// of the same type as the target (stable-v1 for stable-v2), else the first
// channel by name that holds the bundle.
func sourceChannel(p olmgraph.Package, target, bundle string) string {
	kind, _, _ := strings.Cut(target, "-v")
	first := ""
	for _, c := range p.Channels {
		if !slices.ContainsFunc(c.Entries, func(x olmgraph.Entry) bool { return x.Name == bundle }) {
			continue
		}
		if k, _, _ := strings.Cut(c.Name, "-v"); k == kind {
			return c.Name
		}
		if first == "" {
			first = c.Name
		}
	}
	return first
}

func version(p olmgraph.Package, name string) string {
	if b, ok := p.Bundle(name); ok {
		return b.Version.String()
	}
	return name
}

func channelLabel(p olmgraph.Package, c olmgraph.Channel) string {
	label := c.Name
	if c.Name == p.DefaultChannel {
		label += " (default)"
	}
	if c.Deprecated != "" {
		label += " (deprecated)"
	}
	return label
}

// Mermaid renders the graph as a Mermaid flowchart: a subgraph per channel,
// nodes labelled by version, edges labelled by kind.
func Mermaid(p olmgraph.Package) string {
	var sb strings.Builder
	id := func(ch, bundle string) string {
		ci := slices.IndexFunc(p.Channels, func(c olmgraph.Channel) bool { return c.Name == ch })
		bi := slices.IndexFunc(p.Bundles, func(b olmgraph.Bundle) bool { return b.Name == bundle })
		return fmt.Sprintf("c%d_b%d", ci, bi)
	}
	sb.WriteString("graph LR\n")
	var deprecated []string
	for ci, c := range p.Channels {
		fmt.Fprintf(&sb, "  subgraph c%d[\"%s\"]\n    direction LR\n", ci, channelLabel(p, c))
		for _, e := range c.Entries {
			label := version(p, e.Name)
			if b, ok := p.Bundle(e.Name); ok && b.Deprecated != "" {
				label += " (deprecated)"
				deprecated = append(deprecated, id(c.Name, e.Name))
			}
			fmt.Fprintf(&sb, "    %s[\"%s\"]\n", id(c.Name, e.Name), label)
		}
		sb.WriteString("  end\n")
	}
	arrows := map[olmgraph.Kind]string{olmgraph.Replaces: "-->", olmgraph.Skips: "-.->", olmgraph.SkipRange: "==>"}
	for _, e := range Edges(p) {
		fmt.Fprintf(&sb, "  %s %s|%s| %s\n", id(e.FromChannel, e.From), arrows[e.Kind], e.Kind, id(e.Channel, e.To))
	}
	if len(deprecated) > 0 {
		sb.WriteString("  classDef deprecated fill:#fde2e2,stroke:#c0392b,stroke-dasharray:4 3\n")
		fmt.Fprintf(&sb, "  class %s deprecated\n", strings.Join(deprecated, ","))
	}
	return sb.String()
}

// Markdown is graph.md: a generated-file note, the package summary and the
// Mermaid graph in a fenced block.
func Markdown(p olmgraph.Package) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "<!-- Generated by `bundlegen graph` from catalog/%s/catalog.yaml. Do not edit. -->\n\n", p.Name)
	fmt.Fprintf(&sb, "# Upgrade graph of `%s`\n\n", p.Name)
	fmt.Fprintf(&sb, "Default channel: `%s`. Arrows point from an installed version to the version OLM may upgrade it to: ", p.DefaultChannel)
	sb.WriteString("solid `replaces`, dotted `skips`, thick `skipRange`.\n")
	if p.Deprecated != "" {
		fmt.Fprintf(&sb, "\n**Deprecated package:** %s\n", p.Deprecated)
	}
	for _, c := range p.Channels {
		if c.Deprecated != "" {
			fmt.Fprintf(&sb, "\n- Channel `%s` is deprecated: %s", c.Name, c.Deprecated)
		}
	}
	for _, b := range p.Bundles {
		if b.Deprecated != "" {
			fmt.Fprintf(&sb, "\n- Bundle `%s` is deprecated: %s", b.Name, b.Deprecated)
		}
	}
	sb.WriteString("\n\n```mermaid\n")
	sb.WriteString(Mermaid(p))
	sb.WriteString("```\n")
	return sb.String()
}
