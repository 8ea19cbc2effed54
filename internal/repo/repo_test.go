package repo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoot(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "channels"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a", "b", "channels-not"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644))
	// A nested module without channels/ is not the root.
	require.NoError(t, os.WriteFile(filepath.Join(root, "a", "go.mod"), []byte("module y\n"), 0o644))
	real, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)

	got, err := Root(filepath.Join(root, "a", "b"))
	require.NoError(t, err)
	require.Equal(t, real, mustEval(t, got))

	t.Chdir(filepath.Join(root, "a"))
	got, err = Root("")
	require.NoError(t, err)
	require.Equal(t, real, mustEval(t, got))

	_, err = Root(t.TempDir())
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, err, "holds go.mod and channels/")
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return r
}
