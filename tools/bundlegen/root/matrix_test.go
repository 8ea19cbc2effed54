package root_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCatalogRefusesAStrandedHeadOperator: the repository's releases with
// the CRD package's bridge from 1.x to 2.0.0 removed. Operator 3.0.0 heads
// stable-v3 and reads v1alpha2; CRD package 1.0.0 heads stable-v1, serves
// v1alpha1 alone and now has no upgrade edge to a release that serves
// v1alpha2: a cluster installed from that channel strands the operator.
// bundlegen catalog refuses it, naming both releases and the way out, and
// writes nothing. (With the bridge, 1.0.0 is a "no" cell of operator 3.0.0
// that an upgrade of the CRD package mends: the repository's catalog.)
func TestCatalogRefusesAStrandedHeadOperator(t *testing.T) {
	r := repoCopy(t)
	extras := filepath.Join(r, "channels", "inferencestack-crds.release.yaml")
	data := readFile(t, extras)
	// Both bridges out of 1.x: to 2.0.0 and to 2.1.0.
	for _, bridge := range []string{
		"- bundle: 2.0.0\n  skipRange: \">=1.0.0 <2.0.0\"\n  channels: [stable-v2]\n",
		"- bundle: 2.1.0\n  skipRange: \">=1.0.0 <2.1.0\"\n  channels: [stable-v2]\n",
	} {
		require.Contains(t, data, bridge)
		data = strings.Replace(data, bridge, "", 1)
	}
	require.NoError(t, os.WriteFile(extras, []byte(data), 0o644))
	before := readFile(t, filepath.Join(r, "catalog", "inferencestack-crds", "catalog.yaml"))

	code, stdout, stderr := bundlegen(t, r, "catalog")
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	for _, want := range []string{
		"operator 3.0.0 (head of candidate-v3, stable-v3) reads InferenceStack v1alpha2 (channels/releases/3.0.0.yaml: api.reads)",
		"but CRD package 1.0.0 (head of candidate-v1, stable-v1) serves only v1alpha1 (channels/releases/1.0.0.yaml: api.served)",
		"no upgrade edge of the CRD package leads from 1.0.0 to a release that serves v1alpha1 and v1alpha2: a cluster installed from that CRD channel strands the operator",
		"Way out: add a bridge from 1.0.0 to a CRD package release that serves v1alpha1 and v1alpha2 (bridges in channels/inferencestack-crds.release.yaml, docs/catalog.md), serve v1alpha2 in 1.0.0, or leave operator 3.0.0 out of the channels",
	} {
		require.Contains(t, stderr, want)
	}
	require.NotContains(t, stderr, "operator 1.0.0 (head", "the v1alpha1 operators are not stranded")
	require.Equal(t, before, readFile(t, filepath.Join(r, "catalog", "inferencestack-crds", "catalog.yaml")), "nothing written")
}
