package upgrades_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"

	"github.com/inferencestack/inferencestack/internal/fbc"
)

// render runs operator-registry's semver template (through fbc, as
// `bundlegen catalog` does) over in-memory bundles named by their version,
// and returns each channel's entries as "name: replaces R; skips S..." lines.
func render(t *testing.T, template string) map[string][]string {
	t.Helper()
	renderer := func(_ context.Context, ref string) (*declcfg.DeclarativeConfig, error) {
		v := strings.TrimPrefix(ref, "bundle/demo/")
		return &declcfg.DeclarativeConfig{Bundles: []declcfg.Bundle{{
			Schema: declcfg.SchemaBundle, Package: "demo", Name: "demo.v" + v, Image: ref,
			Properties: []property.Property{property.MustBuildPackage("demo", v)},
		}}}, nil
	}
	cfg, err := fbc.RenderTemplate(context.Background(), strings.NewReader(template), renderer)
	require.NoError(t, err)
	out := map[string][]string{"default": {cfg.Packages[0].DefaultChannel}}
	for _, ch := range cfg.Channels {
		for _, e := range ch.Entries {
			line := strings.TrimPrefix(e.Name, "demo.v") + ":"
			if e.Replaces != "" {
				line += " replaces " + strings.TrimPrefix(e.Replaces, "demo.v") + ";"
			}
			if len(e.Skips) > 0 {
				var skips []string
				for _, s := range e.Skips {
					skips = append(skips, strings.TrimPrefix(s, "demo.v"))
				}
				slices.Sort(skips)
				line += " skips " + strings.Join(skips, ", ") + ";"
			}
			if e.SkipRange != "" {
				line += " skipRange " + e.SkipRange + ";"
			}
			out[ch.Name] = append(out[ch.Name], strings.TrimSuffix(line, ";"))
		}
	}
	return out
}

func template(major, minor bool, stable []string, candidate ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "schema: olm.semver\ngenerateMajorChannels: %t\ngenerateMinorChannels: %t\n", major, minor)
	for name, vs := range map[string][]string{"stable": stable, "candidate": candidate} {
		if len(vs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s:\n  bundles:\n", name)
		for _, v := range vs {
			fmt.Fprintf(&b, "  - image: bundle/demo/%s\n", v)
		}
	}
	return b.String()
}

// TestSemverTemplateEdges pins down what docs/catalog.md says the semver
// template (operator-registry alpha/template/semver) generates: only the
// highest patch of each minor gets edges; it replaces the highest patch of
// the previous minor and skips every other lower version of its major in
// that channel type (skips accumulate across minors); nothing crosses a
// major or a channel type; no skipRange; minor channels' edges point into
// the other minor channels of the major.
func TestSemverTemplateEdges(t *testing.T) {
	versions := []string{"1.0.0", "1.0.1", "1.1.0", "1.1.1", "1.2.0", "2.0.0", "2.0.1", "2.1.0"}
	tests := []struct {
		name     string
		template string
		want     map[string][]string
	}{
		{
			name:     "major channels",
			template: template(true, false, versions),
			want: map[string][]string{
				"default": {"stable-v2"},
				"stable-v1": {
					"1.0.0:",
					"1.0.1: skips 1.0.0",
					"1.1.0:",
					"1.1.1: replaces 1.0.1; skips 1.0.0, 1.1.0",
					"1.2.0: replaces 1.1.1; skips 1.0.0, 1.0.1, 1.1.0",
				},
				"stable-v2": {
					"2.0.0:",
					"2.0.1: skips 2.0.0",
					"2.1.0: replaces 2.0.1; skips 2.0.0",
				},
			},
		},
		{
			name:     "minor channels",
			template: template(false, true, versions[:5]),
			want: map[string][]string{
				"default":     {"stable-v1.2"},
				"stable-v1.0": {"1.0.0:", "1.0.1: skips 1.0.0"},
				"stable-v1.1": {"1.1.0:", "1.1.1: replaces 1.0.1; skips 1.0.0, 1.1.0"},
				"stable-v1.2": {"1.2.0: replaces 1.1.1; skips 1.0.0, 1.0.1, 1.1.0"},
			},
		},
		{
			name:     "channel types are linked apart; stable is the default",
			template: template(true, false, []string{"1.0.0", "1.1.0"}, "1.0.0", "1.0.1", "1.1.0"),
			want: map[string][]string{
				"default":      {"stable-v1"},
				"stable-v1":    {"1.0.0:", "1.1.0: replaces 1.0.0"},
				"candidate-v1": {"1.0.0:", "1.0.1: skips 1.0.0", "1.1.0: replaces 1.0.1; skips 1.0.0"},
			},
		},
		{
			name:     "a pre-release is a lower patch of its minor",
			template: template(true, false, []string{"1.0.0", "1.1.0-rc.1", "1.1.0"}),
			want: map[string][]string{
				"default":   {"stable-v1"},
				"stable-v1": {"1.0.0:", "1.1.0-rc.1:", "1.1.0: replaces 1.0.0; skips 1.1.0-rc.1"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, render(t, tc.template))
		})
	}
}
