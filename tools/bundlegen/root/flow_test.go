package root_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/tools/bundlegen/root"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := root.NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestReleaseFlow runs catalog -> validate catalog -> graph -> upgrades in
// process over the fbc test bundles.
func TestReleaseFlow(t *testing.T) {
	testdata, err := filepath.Abs("testdata/fbc")
	require.NoError(t, err)
	out := t.TempDir()
	catalogDir := filepath.Join(out, "catalog")

	// The demo bundles are not bundlegen's, so no release input checks them.
	got, err := run(t, "catalog", "--channels", filepath.Join(testdata, "channels"), "--root", testdata, "-o", catalogDir, "--verify-bundles=false")
	require.NoError(t, err, got)
	require.Contains(t, got, filepath.Join(catalogDir, "demo-operator", "catalog.yaml"))

	got, err = run(t, "validate", "catalog", catalogDir)
	require.NoError(t, err, got)
	require.Contains(t, got, "is valid")

	got, err = run(t, "validate", "catalog", catalogDir, "--require-digests")
	require.ErrorContains(t, err, "finding(s)")
	require.Contains(t, got, `package "demo-operator", channel "candidate-v1,stable-v1", bundle "demo-operator.v1.0.0": bundle image "quay.io/inferencestack/demo-operator-bundle:v1.0.0" is not pinned by digest`)

	got, err = run(t, "validate", "catalog", catalogDir, "--require-digests", "-o", "json")
	require.Error(t, err)
	require.Contains(t, got, `"rule": "image-not-digest"`)
	require.Contains(t, got, `"bundle": "demo-operator.v2.1.0"`)

	got, err = run(t, "graph", "--catalog", catalogDir)
	require.NoError(t, err, got)
	svg, err := os.ReadFile(filepath.Join(catalogDir, "demo-operator", "graph.svg"))
	require.NoError(t, err)
	require.Contains(t, string(svg), "<svg")

	got, err = run(t, "upgrades", "--catalog", catalogDir, "--from", "1.0.0")
	require.NoError(t, err, got)
	require.Contains(t, got, `1.0.0 -> 2.0.0  via skipRange ">=1.0.0 <2.0.0" in stable-v2`)
	require.Contains(t, got, "2.0.0 -> 2.1.0  via replaces in candidate-v2, stable-v2")
	require.Contains(t, got, "newest reachable: 2.1.0")

	got, err = run(t, "upgrades", "--catalog", catalogDir, "--from", "1.0.0", "--version-range", "<2.0.0")
	require.NoError(t, err, got)
	require.Contains(t, got, "newest reachable: 1.1.0")
	require.Contains(t, got, `2.0.0: outside the version range "<2.0.0"`)

	_, err = run(t, "upgrades", "--catalog", catalogDir, "--from", "9.9.9")
	require.ErrorContains(t, err, "no bundle with version 9.9.9")

	// A version the catalog lacks moves on through the skipRange holding it.
	got, err = run(t, "upgrades", "--catalog", catalogDir, "--from", "1.0.5")
	require.NoError(t, err, got)
	require.Contains(t, got, "package demo-operator, installed 1.0.5 (not in the catalog)\n")
	require.Contains(t, got, `1.0.5 -> 2.0.0  via skipRange ">=1.0.0 <2.0.0" in stable-v2`)
	require.Contains(t, got, "note: 1.0.5 is not in the catalog: only a skipRange that holds it leads on from it")
}
