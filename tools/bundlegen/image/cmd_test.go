package image_test

import (
	"bytes"
	"os"
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
