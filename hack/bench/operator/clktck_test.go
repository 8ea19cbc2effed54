package main

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// auxv lays out entries (type, value, type, value, ...) as the kernel does.
func auxv(words ...uint64) []byte {
	var b []byte
	for _, w := range words {
		b = binary.NativeEndian.AppendUint64(b, w)
	}
	return b
}

func TestClockTicks(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the clock tick rate is known to be 100 on linux/amd64, not on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	hz, err := clockTicks()
	require.NoError(t, err)
	require.Equal(t, int64(100), hz, "USER_HZ on linux/amd64")
}

func TestAuxvValue(t *testing.T) {
	const atPagesz = 6
	tests := []struct {
		name      string
		auxv      []byte
		want      uint64
		assertion require.ErrorAssertionFunc
	}{
		{
			name:      "among other entries",
			auxv:      auxv(atPagesz, 4096, atClkTck, 250, 23, 0, atNull, 0),
			want:      250,
			assertion: require.NoError,
		},
		{
			name:      "first entry",
			auxv:      auxv(atClkTck, 1000, atNull, 0),
			want:      1000,
			assertion: require.NoError,
		},
		{
			name: "absent",
			auxv: auxv(atPagesz, 4096, atNull, 0),
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.EqualError(t, err, "the auxiliary vector has no entry of type 17")
			},
		},
		{
			name: "only after AT_NULL",
			auxv: auxv(atPagesz, 4096, atNull, 0, atClkTck, 100),
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.EqualError(t, err, "the auxiliary vector has no entry of type 17")
			},
		},
		{
			name:      "empty",
			auxv:      nil,
			assertion: require.Error,
		},
		{
			name: "truncated",
			auxv: auxv(atPagesz, 4096, atClkTck, 100)[:28],
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.ErrorContains(t, err, "is 28 bytes, not a whole number of 16-byte (type, value) entries")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auxvValue(tc.auxv, atClkTck)
			tc.assertion(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestTicksToDuration(t *testing.T) {
	require.Equal(t, 1500*time.Millisecond, ticksToDuration(150, 100))
	require.Equal(t, 600*time.Millisecond, ticksToDuration(150, 250))
	require.Equal(t, 150*time.Millisecond, ticksToDuration(150, 1000))
}
