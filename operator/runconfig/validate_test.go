package runconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// TestKeptVerdictsAreTheCheckOwn: a run config checked a second time gets
// the verdict a first check gives it, for every case of testdata and
// every line (the second is served from accepted).
func TestKeptVerdictsAreTheCheckOwn(t *testing.T) {
	dirs, err := os.ReadDir("testdata")
	require.NoError(t, err)
	for _, d := range dirs {
		for _, l := range lines {
			accepted.Clear()
			first, firstErr := run(t, d.Name(), l.operand)
			again, againErr := run(t, d.Name(), l.operand)
			require.Equal(t, firstErr, againErr, "%s on %s", d.Name(), l.line.Tag())
			require.Equal(t, first, again, "%s on %s", d.Name(), l.line.Tag())
		}
	}
}

// TestKeptVerdictsFollowWhatCheckReads: a verdict is kept for the line,
// the file and the environment it was given, and another of any of them
// is checked anew.
func TestKeptVerdictsFollowWhatCheckReads(t *testing.T) {
	accepted.Clear()
	stack := readStack(t, filepath.Join("testdata", "override", "in", "stack.yaml"))
	data, err := os.ReadFile(filepath.Join("testdata", "override", "in", "override-v0.3.0.yaml"))
	require.NoError(t, err)
	_, err = FromOverride(stack.Name, stack.Spec, Operand{LlamaStackVersion: "0.3.0"}, data)
	require.NoError(t, err, "with the cache, the operator sets the POSTGRES_* variables the file reads")

	// Another environment: without the cache, the POSTGRES_* variables are unset.
	noCache := stack.DeepCopy()
	noCache.Spec.Cache = nil
	_, err = FromOverride(noCache.Name, noCache.Spec, Operand{LlamaStackVersion: "0.3.0"}, data)
	require.ErrorContains(t, err, "needs environment variable POSTGRES_")

	// Another line: 0.2.23 has no storage section.
	_, err = FromOverride(stack.Name, stack.Spec, Operand{LlamaStackVersion: "0.2.23"}, data)
	require.ErrorContains(t, err, "storage")
}

// TestKeptVerdictsShareNothing: what a caller does to a result never
// reaches the kept verdict, whether the result came from the check or
// from accepted.
func TestKeptVerdictsShareNothing(t *testing.T) {
	accepted.Clear()
	stack := readStack(t, filepath.Join("testdata", "override", "in", "stack.yaml"))
	data, err := os.ReadFile(filepath.Join("testdata", "override", "in", "override-v0.3.0.yaml"))
	require.NoError(t, err)
	operand := Operand{LlamaStackVersion: "0.3.0"}
	var want Result
	for i := range 3 { // checked, then from accepted twice
		res, err := FromOverride(stack.Name, stack.Spec, operand, data)
		require.NoError(t, err)
		if i == 0 {
			want = copyResult(t, res)
		}
		require.Equal(t, want, res, "result %d", i)
		require.NotEmpty(t, res.WritableDirs)
		require.NotNil(t, res.Server)
		res.WritableDirs[0] = "/elsewhere"
		res.Server.Port = ptr.To[int64](1)
		res.Server.Host = ptr.To("changed")
	}
}

func copyResult(t *testing.T, r Result) Result {
	t.Helper()
	v, err := copyVerdict(stackconfig.Result{WritableDirs: r.WritableDirs, Server: r.Server})
	require.NoError(t, err)
	r.WritableDirs, r.Server = v.WritableDirs, v.Server
	return r
}
