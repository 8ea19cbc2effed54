package image_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	imagecmd "github.com/inferencestack/inferencestack/tools/bundlegen/image"
	"github.com/inferencestack/inferencestack/tools/internal/image/imagetest"
)

func TestCatalogCmd(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "demo"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "demo", "catalog.yaml"), []byte("schema: olm.package\nname: demo\n"), 0o600))
	host := imagetest.Registry(t)

	run := func(args ...string) (string, error) {
		cmd := imagecmd.NewCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}

	out, err := run("catalog", dir, "--output", filepath.Join(t.TempDir(), "oci"), "--push", host+"/catalog:v1", "--label", "a=b")
	require.NoError(t, err)
	require.Contains(t, out, "digest: sha256:")
	require.Contains(t, out, "pushed: "+host+"/catalog@sha256:")

	// Same input, same digest, also in JSON.
	again, err := run("catalog", dir, "--push", host+"/catalog:v1", "--label", "a=b", "-o", "json")
	require.NoError(t, err)
	digest := strings.Fields(strings.SplitN(out, "\n", 2)[0])[1]
	require.Contains(t, again, `"digest": "`+digest+`"`)

	_, err = run("bundle", dir, "--push", host+"/b:1", "--label", "a=b")
	require.Error(t, err)
	_, err = run("catalog", dir)
	require.ErrorContains(t, err, "nowhere to put the image")
}

func TestOperatorCmd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../../internal/image/testdata/static")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	host := imagetest.Registry(t)

	run := func(args ...string) (string, error) {
		cmd := imagecmd.NewCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	layout := filepath.Join(t.TempDir(), "oci")
	first, err := run("operator", bin, "--output", layout, "--push", host+"/inferencestack-operator:v1", "--label", "org.opencontainers.image.revision=abc")
	require.NoError(t, err)
	require.Contains(t, first, "pushed: "+host+"/inferencestack-operator@sha256:")
	require.FileExists(t, filepath.Join(layout, "index.json"))
	// Same binary and labels, same digest; another label, another digest.
	again, err := run("operator", bin, "--push", host+"/inferencestack-operator:v1", "--label", "org.opencontainers.image.revision=abc")
	require.NoError(t, err)
	require.Equal(t, strings.SplitN(first, "\n", 2)[0], strings.SplitN(again, "\n", 2)[0])
	other, err := run("operator", bin, "--push", host+"/inferencestack-operator:v1", "--label", "org.opencontainers.image.revision=def")
	require.NoError(t, err)
	require.NotEqual(t, strings.SplitN(first, "\n", 2)[0], strings.SplitN(other, "\n", 2)[0])

	_, err = run("operator", filepath.Join("..", "..", "..", "Makefile"), "--push", host+"/x:1")
	require.ErrorContains(t, err, "is not an ELF executable")
}
