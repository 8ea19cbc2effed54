package olmgraph_test

import (
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/require"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"

	"github.com/inferencestack/inferencestack/internal/olmgraph"
)

func n(v string) string { return "demo.v" + v }

func version(v string) *semver.Version {
	s := semver.MustParse(v)
	return &s
}

func TestAccepts(t *testing.T) {
	entry := olmgraph.Entry{Name: n("2.0.0"), Replaces: n("1.1.0"), Skips: []string{n("1.0.1"), n("1.1.0")}, SkipRange: ">=1.0.0 <2.0.0"}
	tests := []struct {
		name    string
		entry   olmgraph.Entry
		from    string
		version *semver.Version
		want    []olmgraph.Kind
	}{
		{name: "replaces, skips and skipRange at once", entry: entry, from: n("1.1.0"), version: version("1.1.0"),
			want: []olmgraph.Kind{olmgraph.Replaces, olmgraph.Skips, olmgraph.SkipRange}},
		{name: "skips and skipRange", entry: entry, from: n("1.0.1"), version: version("1.0.1"),
			want: []olmgraph.Kind{olmgraph.Skips, olmgraph.SkipRange}},
		{name: "skipRange only", entry: entry, from: n("1.0.0"), version: version("1.0.0"), want: []olmgraph.Kind{olmgraph.SkipRange}},
		{name: "a bundle the catalog does not hold: only a skipRange", entry: entry, from: "", version: version("1.0.5"),
			want: []olmgraph.Kind{olmgraph.SkipRange}},
		{name: "no name matches an entry without replaces", entry: olmgraph.Entry{Name: n("1.0.0")}, from: "", version: version("0.9.0")},
		{name: "unknown version: no skipRange", entry: entry, from: n("1.0.0"), version: nil},
		{name: "unknown version, named: replaces", entry: entry, from: n("1.1.0"), version: nil,
			want: []olmgraph.Kind{olmgraph.Replaces, olmgraph.Skips}},
		{name: "outside the range", entry: entry, from: n("2.0.0"), version: version("2.0.0")},
		{name: "a range that does not parse accepts nothing", entry: olmgraph.Entry{Name: n("2.0.0"), SkipRange: "not a range"}, from: n("1.0.0"), version: version("1.0.0")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.entry.Accepts(tc.from, tc.version))
		})
	}
	require.Equal(t, `skipRange ">=1.0.0 <2.0.0"`, entry.How(olmgraph.SkipRange))
	require.Equal(t, "replaces", entry.How(olmgraph.Replaces))
}

func bundle(v string) olmgraph.Bundle {
	return olmgraph.Bundle{Name: n(v), Version: semver.MustParse(v)}
}

func TestEdges(t *testing.T) {
	p := olmgraph.Package{
		Name:    "demo",
		Bundles: []olmgraph.Bundle{bundle("1.0.0"), bundle("1.0.1"), bundle("1.1.0"), bundle("2.0.0")},
		Channels: []olmgraph.Channel{
			{Name: "stable-v1", Entries: []olmgraph.Entry{
				{Name: n("1.0.0")},
				{Name: n("1.0.1"), Skips: []string{n("1.0.0")}},
				{Name: n("1.1.0"), Replaces: n("1.0.1"), Skips: []string{n("1.0.0")}, SkipRange: ">=1.0.0 <1.1.0"},
			}},
			// A bridge: its range holds every 1.x bundle, which this channel does not hold.
			{Name: "stable-v2", Entries: []olmgraph.Entry{{Name: n("2.0.0"), SkipRange: ">=1.0.0 <=2.0.0"}}},
		},
	}
	edge := func(ch, from, to string, k olmgraph.Kind, how string) olmgraph.Edge {
		return olmgraph.Edge{Channel: ch, From: n(from), To: n(to), Kind: k, How: how}
	}
	require.Equal(t, []olmgraph.Edge{
		edge("stable-v1", "1.0.0", "1.0.1", olmgraph.Skips, "skips"),
		edge("stable-v1", "1.0.1", "1.1.0", olmgraph.Replaces, "replaces"),
		edge("stable-v1", "1.0.0", "1.1.0", olmgraph.Skips, "skips"),
		edge("stable-v1", "1.0.0", "1.1.0", olmgraph.SkipRange, `skipRange ">=1.0.0 <1.1.0"`),
		edge("stable-v1", "1.0.1", "1.1.0", olmgraph.SkipRange, `skipRange ">=1.0.0 <1.1.0"`),
		// Never from a bundle to itself, though the range holds 2.0.0.
		edge("stable-v2", "1.0.0", "2.0.0", olmgraph.SkipRange, `skipRange ">=1.0.0 <=2.0.0"`),
		edge("stable-v2", "1.0.1", "2.0.0", olmgraph.SkipRange, `skipRange ">=1.0.0 <=2.0.0"`),
		edge("stable-v2", "1.1.0", "2.0.0", olmgraph.SkipRange, `skipRange ">=1.0.0 <=2.0.0"`),
	}, p.Edges())
}

func bundleBlob(pkg, name, v string) declcfg.Bundle {
	return declcfg.Bundle{Schema: declcfg.SchemaBundle, Package: pkg, Name: name, Image: "quay.io/demo/bundle:" + v,
		Properties: []property.Property{property.MustBuildPackage(pkg, v)}}
}

func TestGraphs(t *testing.T) {
	cfg := declcfg.DeclarativeConfig{
		Packages: []declcfg.Package{{Schema: declcfg.SchemaPackage, Name: "demo", DefaultChannel: "stable"}},
		Channels: []declcfg.Channel{{Schema: declcfg.SchemaChannel, Package: "demo", Name: "stable", Entries: []declcfg.ChannelEntry{
			{Name: n("1.1.0"), Replaces: n("1.0.0")}, {Name: n("1.0.0")}, {Name: n("bad")},
		}}},
		Bundles: []declcfg.Bundle{bundleBlob("demo", n("1.1.0"), "1.1.0"), bundleBlob("demo", n("1.0.0"), "1.0.0"), bundleBlob("demo", n("bad"), "x.y"),
			bundleBlob("other", "other.v1", "1.0.0")},
		Deprecations: []declcfg.Deprecation{{Schema: declcfg.SchemaDeprecation, Package: "demo", Entries: []declcfg.DeprecationEntry{
			{Reference: declcfg.PackageScopedReference{Schema: declcfg.SchemaBundle, Name: n("1.0.0")}, Message: "old"},
			{Reference: declcfg.PackageScopedReference{Schema: declcfg.SchemaChannel, Name: "stable"}, Message: "gone"},
		}}},
	}
	got, err := olmgraph.Graphs(cfg)
	// Everything readable is in the graph; the rest is named in the error.
	require.ErrorContains(t, err, `package "demo": bundle "demo.vbad": version "x.y"`)
	require.ErrorContains(t, err, `bundle "other.v1": package "other" is referenced but has no olm.package`)
	want := []olmgraph.Package{{
		Name: "demo", DefaultChannel: "stable",
		Bundles: []olmgraph.Bundle{
			{Name: n("1.0.0"), Image: "quay.io/demo/bundle:1.0.0", Version: semver.MustParse("1.0.0"), Deprecated: "old"},
			{Name: n("1.1.0"), Image: "quay.io/demo/bundle:1.1.0", Version: semver.MustParse("1.1.0")},
		},
		Channels: []olmgraph.Channel{{Name: "stable", Deprecated: "gone", Entries: []olmgraph.Entry{
			{Name: n("bad")}, {Name: n("1.0.0")}, {Name: n("1.1.0"), Replaces: n("1.0.0")},
		}}},
	}}
	require.Equal(t, want, got)
}
