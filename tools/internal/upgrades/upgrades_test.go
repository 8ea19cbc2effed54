package upgrades_test

import (
	"context"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/tools/internal/fbc"
	"github.com/inferencestack/inferencestack/tools/internal/upgrades"
)

func n(v string) string { return "demo.v" + v }

// demo is what the semver template renders for 1.0.0 1.0.1 1.1.0 2.0.0 2.1.0
// with major channels; bridge adds the opt-in skipRange to 2.0.0.
func demo(bridge bool, deprecated ...string) fbc.Package {
	p := fbc.Package{Name: "demo", DefaultChannel: "stable-v2"}
	for _, v := range []string{"1.0.0", "1.0.1", "1.1.0", "2.0.0", "2.1.0"} {
		b := fbc.Bundle{Name: n(v), Version: semver.MustParse(v)}
		for _, d := range deprecated {
			if d == v {
				b.Deprecated = "deprecated"
			}
		}
		p.Bundles = append(p.Bundles, b)
	}
	v2 := fbc.Entry{Name: n("2.0.0")}
	if bridge {
		v2.SkipRange = ">=1.0.0 <2.0.0"
	}
	p.Channels = []fbc.Channel{
		{Name: "stable-v1", Entries: []fbc.Entry{
			{Name: n("1.0.0")},
			{Name: n("1.0.1"), Skips: []string{n("1.0.0")}},
			{Name: n("1.1.0"), Replaces: n("1.0.1")},
		}},
		{Name: "stable-v2", Entries: []fbc.Entry{v2, {Name: n("2.1.0"), Replaces: n("2.0.0")}}},
	}
	return p
}

func TestUpgrades(t *testing.T) {
	tests := []struct {
		name        string
		u           upgrades.Upgrades
		wantPath    []string
		wantFinal   string
		unreachable map[string]string // bundle -> reason fragment
		assertion   require.ErrorAssertionFunc
	}{
		{
			name:        "within the major only, by default",
			u:           upgrades.Upgrades{Package: demo(false), From: "1.0.0"},
			wantPath:    []string{n("1.0.1"), n("1.1.0")},
			wantFinal:   n("1.1.0"),
			unreachable: map[string]string{n("2.0.0"): "never links major versions", n("2.1.0"): "replaces demo.v2.0.0"},
			assertion:   require.NoError,
		},
		{
			name:      "bridge crosses the major, then follows replaces",
			u:         upgrades.Upgrades{Package: demo(true), From: "1.0.0"},
			wantPath:  []string{n("2.0.0"), n("2.1.0")},
			wantFinal: n("2.1.0"),
			assertion: require.NoError,
		},
		{
			name:        "version range keeps the bridge closed",
			u:           upgrades.Upgrades{Package: demo(true), From: "1.0.0", VersionRange: "1.x"},
			wantPath:    []string{n("1.0.1"), n("1.1.0")},
			wantFinal:   n("1.1.0"),
			unreachable: map[string]string{n("2.0.0"): `outside the version range "1.x"`},
			assertion:   require.NoError,
		},
		{
			name:        "channel filter keeps the bridge closed",
			u:           upgrades.Upgrades{Package: demo(true), From: "1.0.1", Channels: []string{"stable-v1"}},
			wantPath:    []string{n("1.1.0")},
			wantFinal:   n("1.1.0"),
			unreachable: map[string]string{n("2.1.0"): "not in the requested channels [stable-v1]"},
			assertion:   require.NoError,
		},
		{
			// OLM v1 sorts deprecated bundles after the installed one, so a
			// deprecated bridge target is never taken.
			name:        "deprecated successor sorts after the installed bundle",
			u:           upgrades.Upgrades{Package: demo(true, "2.0.0"), From: "1.1.0"},
			wantFinal:   n("1.1.0"),
			unreachable: map[string]string{n("2.0.0"): "prefers non-deprecated"},
			assertion:   require.NoError,
		},
		{
			name:      "already newest",
			u:         upgrades.Upgrades{Package: demo(false), From: "2.1.0"},
			wantFinal: n("2.1.0"),
			assertion: require.NoError,
		},
		{name: "unknown version", u: upgrades.Upgrades{Package: demo(false), From: "3.0.0"}, assertion: require.Error},
		{name: "bad range", u: upgrades.Upgrades{Package: demo(false), From: "1.0.0", VersionRange: "~>banana"}, assertion: require.Error},
		{name: "unknown channel", u: upgrades.Upgrades{Package: demo(false), From: "1.0.0", Channels: []string{"fast"}}, assertion: require.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.u.Run(context.Background())
			tc.assertion(t, err)
			if err != nil {
				return
			}
			var path []string
			for _, s := range got.Path {
				path = append(path, s.To)
				require.NotEmpty(t, s.Edge)
			}
			require.Equal(t, tc.wantPath, path)
			require.Equal(t, tc.wantFinal, got.Final)
			for b, frag := range tc.unreachable {
				found := false
				for _, u := range got.Unreachable {
					if u.Bundle == b {
						found = true
						require.Contains(t, u.Reason, frag)
					}
				}
				require.True(t, found, "%s should be unreachable: %+v", b, got.Unreachable)
			}
		})
	}
}

func TestDeprecatedPreferredLast(t *testing.T) {
	// 1.0.0 is skipped by both 1.0.1 and 1.1.0 (add the skip); 1.1.0 deprecated
	// means OLM v1 picks 1.0.1 first.
	p := demo(false, "1.1.0")
	p.Channels[0].Entries[2].Skips = []string{n("1.0.0")}
	got, err := upgrades.Upgrades{Package: p, From: "1.0.0"}.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, n("1.0.1"), got.Path[0].To)
	require.Equal(t, "skips in stable-v1", got.Path[0].Edge)
}
