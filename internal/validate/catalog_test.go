package validate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"

	"github.com/inferencestack/inferencestack/internal/validate"
)

const pkg = "demo"

// entry builds a channel entry: entry("1.1.0", replaces("1.0.0"), skips("1.0.1")).
type entryOpt func(*declcfg.ChannelEntry)

func replaces(v string) entryOpt { return func(e *declcfg.ChannelEntry) { e.Replaces = name(v) } }
func skips(vs ...string) entryOpt {
	return func(e *declcfg.ChannelEntry) {
		for _, v := range vs {
			e.Skips = append(e.Skips, name(v))
		}
	}
}
func skipRange(r string) entryOpt { return func(e *declcfg.ChannelEntry) { e.SkipRange = r } }

func name(v string) string { return pkg + ".v" + v }

func entry(v string, opts ...entryOpt) declcfg.ChannelEntry {
	e := declcfg.ChannelEntry{Name: name(v)}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func channel(n string, entries ...declcfg.ChannelEntry) declcfg.Channel {
	return declcfg.Channel{Schema: declcfg.SchemaChannel, Package: pkg, Name: n, Entries: entries}
}

// catalog builds a one-package catalog whose bundles are every version named
// in the channels, with tag images unless digest is set.
func catalog(defaultChannel string, digest bool, channels ...declcfg.Channel) declcfg.DeclarativeConfig {
	cfg := declcfg.DeclarativeConfig{
		Packages: []declcfg.Package{{Schema: declcfg.SchemaPackage, Name: pkg, DefaultChannel: defaultChannel}},
		Channels: channels,
	}
	seen := map[string]bool{}
	for _, ch := range channels {
		for _, e := range ch.Entries {
			if seen[e.Name] {
				continue
			}
			seen[e.Name] = true
			v := strings.TrimPrefix(e.Name, pkg+".v")
			img := "quay.io/demo/bundle:v" + v
			if digest {
				img = "quay.io/demo/bundle@sha256:" + strings.Repeat("a", 64)
			}
			cfg.Bundles = append(cfg.Bundles, declcfg.Bundle{
				Schema: declcfg.SchemaBundle, Package: pkg, Name: e.Name, Image: img,
				Properties: []property.Property{property.MustBuildPackage(pkg, v)},
			})
		}
	}
	return cfg
}

func TestCatalogConfig(t *testing.T) {
	good := channel("stable-v1",
		entry("1.0.0"),
		entry("1.0.1", skips("1.0.0")),
		entry("1.1.0", replaces("1.0.1")),
	)
	tests := []struct {
		name           string
		cfg            declcfg.DeclarativeConfig
		requireDigests bool
		// want lists rule, channel, bundle and a message fragment of each
		// expected finding; nil means the catalog is valid.
		want []validate.CatalogFinding
	}{
		{name: "valid", cfg: catalog("stable-v1", false, good)},
		{name: "valid with digests required", cfg: catalog("stable-v1", true, good), requireDigests: true},
		{
			name: "two channel heads",
			cfg:  catalog("stable-v1", false, channel("stable-v1", entry("1.0.0"), entry("1.1.0"))),
			want: []validate.CatalogFinding{
				{Rule: validate.RuleModel, Channel: "stable-v1", Bundle: name("1.0.0"), Message: "multiple channel heads"},
				{Rule: validate.RuleUnreachableFromPreviousHead, Channel: "stable-v1", Bundle: name("1.1.0"), Message: `unreachable from the previous head "demo.v1.0.0"`},
			},
		},
		{
			name: "replaces cycle",
			cfg: catalog("stable-v1", false, channel("stable-v1",
				entry("1.0.0", replaces("1.1.0")), entry("1.1.0", replaces("1.0.0")), entry("1.2.0", replaces("1.1.0")))),
			want: []validate.CatalogFinding{
				{Rule: validate.RuleModel, Channel: "stable-v1", Bundle: name("1.1.0"), Message: "detected cycle in replaces chain"},
			},
		},
		{
			name: "stranded bundle",
			cfg: catalog("stable-v1", false, channel("stable-v1",
				entry("1.0.0"), entry("1.1.0", replaces("1.0.0")), entry("1.2.0", skips("1.1.0")))),
			want: []validate.CatalogFinding{
				{Rule: validate.RuleModel, Channel: "stable-v1", Bundle: name("1.0.0"), Message: "stranded bundles: demo.v1.0.0"},
				{Rule: validate.RuleSkippedInReplacesChain, Channel: "stable-v1", Bundle: name("1.1.0"), Message: "is skipped by demo.v1.2.0"},
			},
		},
		{
			name: "skipped bundle in replaces chain (operator-registry#1762)",
			cfg: catalog("stable-v1", false, channel("stable-v1",
				entry("1.0.0"),
				entry("1.1.0", replaces("1.0.0")),
				entry("1.2.0", replaces("1.1.0"), skips("1.1.0")),
			)),
			want: []validate.CatalogFinding{
				{Rule: validate.RuleModel, Channel: "stable-v1", Bundle: name("1.0.0"), Message: "stranded bundles: demo.v1.0.0"},
				{Rule: validate.RuleSkippedInReplacesChain, Channel: "stable-v1", Bundle: name("1.1.0"), Message: `is skipped by demo.v1.2.0 but also replaces "demo.v1.0.0"`},
			},
		},
		{
			name: "head is not the highest version",
			cfg: catalog("stable-v1", false, channel("stable-v1",
				entry("1.0.0"), entry("1.2.0", replaces("1.0.0")), entry("1.1.0", replaces("1.2.0")))),
			want: []validate.CatalogFinding{
				{Rule: validate.RuleHeadNotHighest, Channel: "stable-v1", Bundle: name("1.1.0"), Message: `channel head "demo.v1.1.0" (1.1.0) is not the highest version`},
				{Rule: validate.RuleUnreachableFromPreviousHead, Channel: "stable-v1", Bundle: name("1.2.0"), Message: `unreachable from the previous head "demo.v1.1.0"`},
			},
		},
		{
			name: "newest bundle unreachable from previous head",
			cfg: catalog("stable-v1", false, channel("stable-v1",
				entry("1.0.0"), entry("1.1.0", replaces("1.0.0")), entry("1.2.0", skips("1.0.0")))),
			want: []validate.CatalogFinding{
				{Rule: validate.RuleModel, Channel: "stable-v1", Bundle: name("1.1.0"), Message: "multiple channel heads found in graph: demo.v1.1.0, demo.v1.2.0"},
				{Rule: validate.RuleUnreachableFromPreviousHead, Channel: "stable-v1", Bundle: name("1.2.0"), Message: `unreachable from the previous head "demo.v1.1.0"`},
			},
		},
		{
			name: "skipRange reaches the previous head",
			cfg: catalog("stable-v1", false, channel("stable-v1",
				entry("1.0.0"), entry("1.1.0", replaces("1.0.0")), entry("2.0.0", skips("1.0.0"), skipRange(">=1.0.0 <2.0.0")))),
			want: []validate.CatalogFinding{
				// 1.1.0 and 2.0.0 are both heads (skipRange is no head edge); but 1.1.0 -> 2.0.0 is reachable.
				{Rule: validate.RuleModel, Channel: "stable-v1", Bundle: name("1.1.0"), Message: "multiple channel heads"},
			},
		},
		{
			name: "default channel does not exist",
			cfg:  catalog("stable-v9", false, good),
			want: []validate.CatalogFinding{
				{Rule: validate.RuleDefaultChannelMissing, Channel: "stable-v9", Message: `default channel "stable-v9" does not exist; set defaultChannel to one of [stable-v1]`},
				{Rule: validate.RuleModel, Channel: "stable-v9", Message: "channel must contain at least one bundle"},
			},
		},
		{
			name:           "bundle images not digests",
			cfg:            catalog("stable-v1", false, good),
			requireDigests: true,
			want: []validate.CatalogFinding{
				{Rule: validate.RuleImageNotDigest, Channel: "stable-v1", Bundle: name("1.0.0"), Message: `"quay.io/demo/bundle:v1.0.0" is not pinned by digest`},
				{Rule: validate.RuleImageNotDigest, Channel: "stable-v1", Bundle: name("1.0.1"), Message: "not pinned by digest"},
				{Rule: validate.RuleImageNotDigest, Channel: "stable-v1", Bundle: name("1.1.0"), Message: "not pinned by digest"},
			},
		},
		{
			name: "deprecation of a missing bundle",
			cfg: func() declcfg.DeclarativeConfig {
				c := catalog("stable-v1", false, good)
				c.Deprecations = []declcfg.Deprecation{{Schema: declcfg.SchemaDeprecation, Package: pkg, Entries: []declcfg.DeprecationEntry{
					{Reference: declcfg.PackageScopedReference{Schema: declcfg.SchemaBundle, Name: name("0.9.0")}, Message: "old"},
				}}}
				return c
			}(),
			want: []validate.CatalogFinding{
				{Rule: validate.RuleModel, Message: "demo.v0.9.0"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := validate.CatalogConfig(tc.cfg, tc.requireDigests)
			require.Len(t, got, len(tc.want), "findings: %v", got)
			for i, w := range tc.want {
				g := got[i]
				require.Equal(t, pkg, g.Package, "finding %d names its package: %s", i, g)
				require.Equal(t, w.Rule, g.Rule, "finding %d: %s", i, g)
				require.Equal(t, w.Channel, g.Channel, "finding %d: %s", i, g)
				require.Equal(t, w.Bundle, g.Bundle, "finding %d: %s", i, g)
				require.Contains(t, g.Message, w.Message, "finding %d: %s", i, g)
			}
		})
	}
}

func TestCatalogRun(t *testing.T) {
	dir := t.TempDir()
	cfg := catalog("stable-v9", false, channel("stable-v1", entry("1.0.0")))
	f, err := os.Create(filepath.Join(dir, "catalog.yaml"))
	require.NoError(t, err)
	require.NoError(t, declcfg.WriteYAML(cfg, f))
	require.NoError(t, f.Close())

	got, err := validate.Catalog{Dir: dir}.Run(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, got)
	require.Contains(t, got[0].String(), `package "demo", channel "stable-v9": default channel "stable-v9" does not exist`)

	_, err = validate.Catalog{Dir: filepath.Join(dir, "missing")}.Run(context.Background())
	require.Error(t, err)
}
