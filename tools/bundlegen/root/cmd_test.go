package root

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	repo = "../../.."
	in   = "../../internal/bundle/testdata/in"
)

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := NewCmd()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func bundleArgs(out string) []string {
	return []string{"bundle",
		"--releases", in + "/releases", "--lock", in + "/images.lock",
		"--crds", in + "/crd", "--rbac", in + "/rbac", "--samples", in + "/samples",
		"--manager", repo + "/operator/config/manager/manager.yaml",
		"--bases", repo + "/operator/config/manifests/bases",
		"--output", out}
}

func TestBundleAndValidate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bundle")
	stdout, _, err := run(t, bundleArgs(out)...)
	require.NoError(t, err)
	require.Equal(t, out+"/inferencestack-crds/1.0.0: written, valid\n"+out+"/inferencestack-operator/1.0.0: written, valid\n", stdout)

	stdout, _, err = run(t, append(bundleArgs(out), "--check")...)
	require.NoError(t, err)
	require.Contains(t, stdout, "inferencestack-operator/1.0.0: up to date, valid")

	stdout, _, err = run(t, "validate", "bundle", "--rbac", in+"/rbac",
		out+"/inferencestack-crds/1.0.0", out+"/inferencestack-operator/1.0.0")
	require.NoError(t, err)
	require.Contains(t, stdout, "inferencestack-operator/1.0.0: 0 errors")

	csv := filepath.Join(out, "inferencestack-crds/1.0.0/manifests/inferencestack-crds.clusterserviceversion.yaml")
	data, err := os.ReadFile(csv)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(csv, []byte(strings.Replace(string(data), "  displayName: Inference Stack CRDs\n", "", 1)), 0o644))
	stdout, _, err = run(t, "validate", "bundle", out+"/inferencestack-crds/1.0.0")
	require.ErrorContains(t, err, "1 of 1 bundles have errors")
	require.Contains(t, stdout, "error [operator-framework/api] manifests/inferencestack-crds.clusterserviceversion.yaml Spec.DisplayName: required field missing")

	stdout, _, err = run(t, "validate", "bundle", "-o", "json", out+"/inferencestack-operator/1.0.0")
	require.NoError(t, err)
	require.Contains(t, stdout, `"findings": null`)
}

func TestBundleErrorExits(t *testing.T) {
	_, _, err := run(t, append(bundleArgs(t.TempDir()), "--version", "9.9.9")...)
	require.ErrorContains(t, err, "release 9.9.9")
	require.ErrorContains(t, err, "does not exist")
}

func TestPin(t *testing.T) {
	stdout, _, err := run(t, "pin", "--releases", in+"/releases", "--lock", in+"/images.lock")
	require.NoError(t, err)
	require.Contains(t, stdout, "starter: quay.io/inferencestack/distribution-starter@sha256:")
	require.Contains(t, stdout, "operatorVersion: 1.0.0\n")

	empty := filepath.Join(t.TempDir(), "empty.lock")
	require.NoError(t, os.WriteFile(empty, []byte("images: {}\n"), 0o644))
	_, _, err = run(t, "pin", "--releases", in+"/releases", "--lock", empty)
	require.ErrorContains(t, err, "has no digest in the image lock")

	stdout, stderr, err := run(t, "pin", "--releases", in+"/releases", "--lock", empty, "--allow-tags")
	require.NoError(t, err)
	require.Contains(t, stdout, "starter: quay.io/inferencestack/distribution-starter:0.2.23")
	require.Contains(t, stderr, "warning: image quay.io/inferencestack/distribution-starter:0.2.23 is pinned by tag")
}
