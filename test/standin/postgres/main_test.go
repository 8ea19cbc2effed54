package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStartContract: the stand-in refuses to start where the official
// image would, initialises an empty folder once, and then answers
// pg_isready on its socket.
func TestStartContract(t *testing.T) {
	socketDir = t.TempDir()
	tests := []struct {
		name     string
		password string
		setup    func(t *testing.T, data string)
		check    bool // checkDataDir after prepare
		want     string
	}{
		{name: "no password", want: "superuser password is not specified"},
		{name: "not empty", password: "p", setup: func(t *testing.T, data string) {
			require.NoError(t, os.MkdirAll(data, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(data, "x"), nil, 0o600))
		}, want: "exists but is not empty"},
		{name: "uncreatable", password: "p", setup: func(t *testing.T, data string) {
			require.NoError(t, os.WriteFile(filepath.Dir(data), nil, 0o600))
		}, want: "cannot create directory"},
		{name: "initialised, group-writable", setup: func(t *testing.T, data string) {
			require.NoError(t, os.MkdirAll(data, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(data, "PG_VERSION"), []byte("16\n"), 0o600))
			require.NoError(t, os.Chmod(data, 0o770))
		}, check: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "volume", "pgdata")
			if tc.setup != nil {
				tc.setup(t, data)
			}
			t.Setenv("POSTGRES_PASSWORD", tc.password)
			err := prepare(data)
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			if tc.check {
				// prepare's chmod 0700 undid the kubelet's fsGroup g+rwx.
				require.NoError(t, checkDataDir(data))
				require.NoError(t, os.Chmod(data, 0o770))
				require.ErrorContains(t, checkDataDir(data), "invalid permissions")
			}
		})
	}

	t.Run("serves", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "pgdata")
		t.Setenv("PGDATA", data)
		t.Setenv("POSTGRES_PASSWORD", "p")
		t.Setenv("PGPORT", "0")
		require.Error(t, ready(), "pg_isready answers before the server runs")
		go func() { _ = run() }()
		require.Eventually(t, func() bool { return ready() == nil }, 10*time.Second, 20*time.Millisecond)
		_, err := os.Stat(filepath.Join(data, "PG_VERSION"))
		require.NoError(t, err)
	})
}
