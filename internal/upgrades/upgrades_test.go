package upgrades_test

import (
	"context"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/olmgraph"
	"github.com/inferencestack/inferencestack/internal/upgrades"
)

func n(v string) string { return "demo.v" + v }

// demo is what the semver template renders for 1.0.0 1.0.1 1.1.0 2.0.0 2.1.0
// with major channels; bridge adds the opt-in skipRange to 2.0.0.
func demo(bridge bool, deprecated ...string) olmgraph.Package {
	p := olmgraph.Package{Name: "demo", DefaultChannel: "stable-v2"}
	for _, v := range []string{"1.0.0", "1.0.1", "1.1.0", "2.0.0", "2.1.0"} {
		b := olmgraph.Bundle{Name: n(v), Version: semver.MustParse(v)}
		for _, d := range deprecated {
			if d == v {
				b.Deprecated = "deprecated"
			}
		}
		p.Bundles = append(p.Bundles, b)
	}
	v2 := olmgraph.Entry{Name: n("2.0.0")}
	if bridge {
		v2.SkipRange = ">=1.0.0 <2.0.0"
	}
	p.Channels = []olmgraph.Channel{
		{Name: "stable-v1", Entries: []olmgraph.Entry{
			{Name: n("1.0.0")},
			{Name: n("1.0.1"), Skips: []string{n("1.0.0")}},
			{Name: n("1.1.0"), Replaces: n("1.0.1")},
		}},
		{Name: "stable-v2", Entries: []olmgraph.Entry{v2, {Name: n("2.1.0"), Replaces: n("2.0.0")}}},
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

// TestFromOutsideTheCatalog: an installed version the catalog lacks moves on
// only through a skipRange that holds it, as in OLM v1 (replaces and skips
// name the installed bundle).
func TestFromOutsideTheCatalog(t *testing.T) {
	tests := []struct {
		name      string
		u         upgrades.Upgrades
		wantPath  []string
		wantEdge  string
		assertion require.ErrorAssertionFunc
	}{
		{
			name:      "a skipRange holds it",
			u:         upgrades.Upgrades{Package: demo(true), From: "1.0.5"},
			wantPath:  []string{n("2.0.0"), n("2.1.0")},
			wantEdge:  `skipRange ">=1.0.0 <2.0.0" in stable-v2`,
			assertion: require.NoError,
		},
		{
			name:      "no skipRange holds it",
			u:         upgrades.Upgrades{Package: demo(false), From: "1.0.5"},
			assertion: require.Error,
		},
		{
			// replaces and skips of the bridge's neighbours name bundles, not
			// versions: a version below the range has no way on.
			name:      "below the skipRange",
			u:         upgrades.Upgrades{Package: demo(true), From: "0.9.0"},
			assertion: require.Error,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.u.Run(context.Background())
			tc.assertion(t, err)
			if err != nil {
				require.ErrorContains(t, err, "no skipRange in its channels holds")
				return
			}
			require.Empty(t, got.Installed)
			require.Equal(t, tc.u.From, got.FromVersion)
			var path []string
			for _, s := range got.Path {
				path = append(path, s.To)
			}
			require.Equal(t, tc.wantPath, path)
			require.Empty(t, got.Path[0].From)
			require.Equal(t, tc.wantEdge, got.Path[0].Edge)
			require.Contains(t, got.Notes[len(got.Notes)-1], "1.0.5 is not in the catalog")
		})
	}
}

// releases is a package whose 1.0.0 is re-released with build metadata, as
// registry+v1 bundles do: 1.0.0+2 and 1.0.0+10 skip the others.
func releases() olmgraph.Package {
	p := olmgraph.Package{Name: "demo", DefaultChannel: "stable-v1"}
	vs := []string{"1.0.0", "1.0.0+1", "1.0.0+2", "1.0.0+10"}
	for _, v := range vs {
		p.Bundles = append(p.Bundles, olmgraph.Bundle{Name: n(v), Version: semver.MustParse(v)})
	}
	p.Channels = []olmgraph.Channel{{Name: "stable-v1", Entries: []olmgraph.Entry{
		{Name: n("1.0.0")},
		{Name: n("1.0.0+1"), Replaces: n("1.0.0")},
		{Name: n("1.0.0+2"), Replaces: n("1.0.0+1"), Skips: []string{n("1.0.0")}},
		{Name: n("1.0.0+10"), Replaces: n("1.0.0+2"), Skips: []string{n("1.0.0"), n("1.0.0+1")}},
	}}}
	return p
}

// TestBuildMetadataIsARelease: build metadata orders as OLM v1.11 orders it
// (a release, compared as pre-release identifiers: 10 after 2), --from
// matches the exact release, and the notes name the ties of OLM v1.5-v1.10.
func TestBuildMetadataIsARelease(t *testing.T) {
	tests := []struct {
		name      string
		from      string
		installed string
		wantPath  []string
	}{
		{name: "from the plain version", from: "1.0.0", installed: n("1.0.0"), wantPath: []string{n("1.0.0+10")}},
		{name: "from a release", from: "1.0.0+1", installed: n("1.0.0+1"), wantPath: []string{n("1.0.0+10")}},
		{name: "from the highest release", from: "1.0.0+10", installed: n("1.0.0+10")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := upgrades.Upgrades{Package: releases(), From: tc.from}.Run(context.Background())
			require.NoError(t, err)
			require.Equal(t, tc.installed, got.Installed)
			var path []string
			for _, s := range got.Path {
				path = append(path, s.To)
			}
			require.Equal(t, tc.wantPath, path)
			require.Empty(t, got.Unreachable)
			require.Len(t, got.Notes, 6, "every pair of the four bundles ties for OLM before v1.11: %v", got.Notes)
			require.Contains(t, got.Notes, "demo.v1.0.0+10 (1.0.0+10) and demo.v1.0.0+2 (1.0.0+2) differ only in build metadata: "+
				"OLM v1.11 and later read it as a release and rank 1.0.0+10 higher, as here; OLM v1.5 to v1.10 compare them as equal and take whichever the catalog lists first")
		})
	}
}
