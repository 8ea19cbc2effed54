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
	in   = "testdata/in"
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
		"--releases", in + "/releases", "--lock", in + "/images.lock", "--published", filepath.Join(filepath.Dir(out), "published.sum"),
		"--crds", in + "/crd", "--rbac", in + "/rbac", "--samples", in + "/samples",
		"--manager", repo + "/operator/config/manager/manager.yaml",
		"--bases", repo + "/operator/config/manifests/bases",
		"--output", out}
}

func TestBundleAndValidate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bundle")
	stdout, stderr, err := run(t, bundleArgs(out)...)
	require.NoError(t, err)
	require.Equal(t, out+"/inferencestack-crds/1.0.0: written, valid\n"+out+"/inferencestack-operator/1.0.0: written, valid\n", stdout)
	require.Contains(t, stderr, "inferencestack-operator/1.0.0: warning [bundlegen] manifests/inferencestack-operator.clusterserviceversion.yaml "+
		"metadata.annotations.containerImage: image quay.io/inferencestack/inferencestack-operator:v1.0.0 is named by tag")

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
	require.Contains(t, stdout, `"severity": "warning"`)
	require.NotContains(t, stdout, `"severity": "error"`)

	// The publish gate: the unresolved images become errors.
	stdout, _, err = run(t, "validate", "bundle", "--require-digests", out+"/inferencestack-operator/1.0.0")
	require.ErrorContains(t, err, "1 of 1 bundles have errors")
	require.Contains(t, stdout, "error [bundlegen] manifests/inferencestack-operator.clusterserviceversion.yaml spec.install.spec.deployments[0].spec.template.spec.containers[0].env[3].value (RELATED_IMAGE_STARTER): "+
		"image docker.io/llamastack/distribution-starter:0.2.23 is named by tag, not digest (--require-digests)")
}

func TestBundleErrorExits(t *testing.T) {
	_, _, err := run(t, append(bundleArgs(t.TempDir()), "--version", "9.9.9")...)
	require.ErrorContains(t, err, "release 9.9.9")
	require.ErrorContains(t, err, "does not exist")
}

func TestPin(t *testing.T) {
	stdout, stderr, err := run(t, "pin", "--releases", in+"/releases", "--lock", in+"/images.lock")
	require.NoError(t, err)
	require.Contains(t, stdout, "starter: docker.io/llamastack/distribution-starter:0.2.23")
	require.Contains(t, stdout, "llamaStackVersion: 0.2.23\n")
	require.Contains(t, stdout, "operatorVersion: 1.0.0\n")
	require.Contains(t, stderr, "warning: image docker.io/llamastack/distribution-starter:0.2.23 is unresolved in the image lock")

	empty := filepath.Join(t.TempDir(), "empty.lock")
	require.NoError(t, os.WriteFile(empty, []byte("images: {}\n"), 0o644))
	_, _, err = run(t, "pin", "--releases", in+"/releases", "--lock", empty)
	require.ErrorContains(t, err, "is not in the image lock")

	stdout, stderr, err = run(t, "pin", "--releases", in+"/releases", "--lock", empty, "--allow-tags")
	require.NoError(t, err)
	require.Contains(t, stdout, "starter: docker.io/llamastack/distribution-starter:0.2.23")
	require.Contains(t, stderr, "warning: image docker.io/llamastack/distribution-starter:0.2.23 is not in the image lock and ships by tag (--allow-tags)")
}
