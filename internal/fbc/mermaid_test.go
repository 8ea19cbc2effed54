package fbc_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"
)

// TestOPMMermaidOmitsBridges records why graph.md is not operator-registry's
// Mermaid writer (docs/catalog.md): the writer draws a skipRange edge only
// from bundles of the same channel, so a cross-major bridge (1.0.0 in
// stable-v1 to 2.0.0 in stable-v2) is not drawn. When this test fails,
// operator-registry draws bridges: reconsider using its writer.
func TestOPMMermaidOmitsBridges(t *testing.T) {
	bundle := func(v string) declcfg.Bundle {
		return declcfg.Bundle{Schema: declcfg.SchemaBundle, Package: "demo", Name: "demo.v" + v, Image: "quay.io/demo/bundle:v" + v,
			Properties: []property.Property{property.MustBuildPackage("demo", v)}}
	}
	cfg := declcfg.DeclarativeConfig{
		Packages: []declcfg.Package{{Schema: declcfg.SchemaPackage, Name: "demo", DefaultChannel: "stable-v2"}},
		Channels: []declcfg.Channel{
			{Schema: declcfg.SchemaChannel, Package: "demo", Name: "stable-v1", Entries: []declcfg.ChannelEntry{{Name: "demo.v1.0.0"}}},
			{Schema: declcfg.SchemaChannel, Package: "demo", Name: "stable-v2", Entries: []declcfg.ChannelEntry{{Name: "demo.v2.0.0", SkipRange: ">=1.0.0 <2.0.0"}}},
		},
		Bundles: []declcfg.Bundle{bundle("1.0.0"), bundle("2.0.0")},
	}
	var buf bytes.Buffer
	require.NoError(t, declcfg.NewMermaidWriter().WriteChannels(cfg, &buf))
	require.Contains(t, buf.String(), `subgraph demo-stable-v2["stable-v2"]`, "the writer ran")
	require.NotContains(t, buf.String(), "-->", "operator-registry's Mermaid writer now draws the bridge:\n%s", buf.String())

	// The same edge in one channel is drawn: the check above can fail.
	cfg.Channels[1].Entries = append([]declcfg.ChannelEntry{{Name: "demo.v1.0.0"}}, cfg.Channels[1].Entries...)
	buf.Reset()
	require.NoError(t, declcfg.NewMermaidWriter().WriteChannels(cfg, &buf))
	require.Contains(t, buf.String(), `-- "skipRange(>=1.0.0 <2.0.0)" -->`)
}
