package upgrades_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/upgrades"
)

// TestRefused: requests OLM v1 could never satisfy fail, naming the flag and
// what excludes the answer, instead of printing an empty path.
func TestRefused(t *testing.T) {
	tests := []struct {
		name string
		u    upgrades.Upgrades
		want []string
	}{
		{
			name: "empty channel name",
			u:    upgrades.Upgrades{Package: demo(true), From: "1.0.0", Channels: []string{""}},
			want: []string{`--channel "": an empty channel name`, "stable-v1, stable-v2"},
		},
		{
			name: "version range that admits no bundle",
			u:    upgrades.Upgrades{Package: demo(true), From: "1.0.0", VersionRange: ">=5.0.0 <3.0.0"},
			want: []string{`--version-range ">=5.0.0 <3.0.0" admits no bundle of the package`, "versions: 1.0.0, 1.0.1, 1.1.0, 2.0.0, 2.1.0", `"2.x"`},
		},
		{
			name: "version range that admits no bundle of the channel",
			u:    upgrades.Upgrades{Package: demo(true), From: "1.0.0", VersionRange: "2.x", Channels: []string{"stable-v1"}},
			want: []string{`--version-range "2.x" admits no bundle in the channels stable-v1`, "versions: 1.0.0, 1.0.1, 1.1.0"},
		},
		{
			name: "installed version held by a skipRange whose bundle the channels exclude",
			u:    upgrades.Upgrades{Package: demo(true), From: "1.5.0", Channels: []string{"stable-v1"}},
			want: []string{`no bundle with version 1.5.0`, `skipRange ">=1.0.0 <2.0.0" of bundle demo.v2.0.0 in channel stable-v2 holds 1.5.0`,
				"it is in none of the requested channels stable-v1", "widen --channel or --version-range"},
		},
		{
			name: "installed version held by a skipRange whose bundle the range excludes",
			u:    upgrades.Upgrades{Package: demo(true), From: "1.5.0", VersionRange: "1.x"},
			want: []string{`skipRange ">=1.0.0 <2.0.0" of bundle demo.v2.0.0 in channel stable-v2 holds 1.5.0`, `its version 2.0.0 is outside --version-range "1.x"`},
		},
		{
			name: "installed version no skipRange holds",
			u:    upgrades.Upgrades{Package: demo(false), From: "1.5.0"},
			want: []string{"no skipRange in its channels holds 1.5.0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.u.Run(context.Background())
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}
