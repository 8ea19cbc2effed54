package image_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/registry"
	imagecmd "github.com/inferencestack/inferencestack/tools/bundlegen/image"
)

// catalogYAML is a one-bundle catalog whose bundle image is image.
func catalogYAML(image string) string {
	return `schema: olm.package
name: demo
defaultChannel: stable
---
schema: olm.channel
package: demo
name: stable
entries:
- name: demo.v1.0.0
---
schema: olm.bundle
package: demo
name: demo.v1.0.0
image: ` + image + `
properties:
- type: olm.package
  value:
    packageName: demo
    version: 1.0.0
`
}

func TestCatalogCmd(t *testing.T) {
	host := registry.Registry(t)
	// The bundle image the catalog names, by the digest the registry gives it.
	img, err := random.Image(64, 1)
	require.NoError(t, err)
	pushed, err := image.Push(context.Background(), img, host+"/demo-bundle:v1.0.0")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "demo"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "demo", "catalog.yaml"), []byte(catalogYAML(pushed.String())), 0o600))

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
	out, err := run("catalog", dir, "--output", layout, "--push", host+"/catalog:v1", "--label", "a=b")
	require.NoError(t, err)
	require.Contains(t, out, "digest: sha256:")
	require.Contains(t, out, "pushed: "+host+"/catalog@sha256:")
	require.FileExists(t, filepath.Join(layout, image.LayoutMarker))

	// Same input, same digest, also in JSON; the layout it wrote is replaced.
	again, err := run("catalog", dir, "--output", layout, "--push", host+"/catalog:v1", "--label", "a=b", "-o", "json")
	require.NoError(t, err)
	digest := strings.Fields(strings.SplitN(out, "\n", 2)[0])[1]
	require.Contains(t, again, `"digest": "`+digest+`"`)

	_, err = run("bundle", dir, "--push", host+"/b:1", "--label", "a=b")
	require.Error(t, err)
	_, err = run("catalog", dir)
	require.ErrorContains(t, err, "nowhere to put the image")
}

// TestRefused: the bad outputs and pushes tried; each is refused before
// anything is written or pushed, naming the path or the image.
func TestRefused(t *testing.T) {
	host := registry.Registry(t)
	tagged := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(tagged, "demo"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tagged, "demo", "catalog.yaml"), []byte(catalogYAML("quay.io/x/demo-bundle:v1.0.0")), 0o600))
	notMine := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(notMine, "release-notes.md"), []byte("mine\n"), 0o600))
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	bundleDir := "testdata/bundle/inferencestack-operator/1.0.0"

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "output is the input", args: []string{"catalog", tagged, "--output", tagged}, want: []string{"refusing to write to the input " + tagged}},
		{name: "output inside the input", args: []string{"catalog", tagged, "--output", filepath.Join(tagged, "demo")}, want: []string{"refusing to write to the input"}},
		{name: "output holds the input", args: []string{"catalog", tagged, "--output", filepath.Dir(tagged)}, want: []string{"refusing to write to the input"}},
		{name: "output dot", args: []string{"catalog", tagged, "--output", "."}, want: []string{"--output .: refusing to write to the working folder"}},
		{name: "output dot dot", args: []string{"catalog", tagged, "--output", ".."}, want: []string{"--output ..: refusing to write to the working folder"}},
		{name: "output the repository root", args: []string{"catalog", tagged, "--output", "../../.."}, want: []string{"refusing to write to the working folder"}},
		{name: "output a folder of someone else's files", args: []string{"catalog", tagged, "--output", notMine},
			want: []string{"--output " + notMine + " holds files (release-notes.md...) and is not an OCI layout bundlegen wrote"}},
		{name: "output a file", args: []string{"catalog", tagged, "--output", file}, want: []string{"is a regular file, not a folder"}},
		{name: "push a catalog naming a bundle by tag", args: []string{"catalog", tagged, "--push", host + "/catalog:v1"},
			want: []string{"refusing to push " + tagged, `bundle image "quay.io/x/demo-bundle:v1.0.0" is not pinned by digest`}},
		{name: "push a bundle naming images by tag", args: []string{"bundle", bundleDir, "--push", host + "/bundle:v1"},
			want: []string{"refusing to push", "image docker.io/llamastack/distribution-starter:0.2.23 is named by tag, not digest (--require-digests)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := imagecmd.NewCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.Equal(t, map[string]bool{"release-notes.md": true}, names(t, notMine), "nothing is replaced")
		})
	}
	// Nothing was pushed.
	_, err := remote.Head(mustRef(t, host+"/catalog:v1"))
	require.Error(t, err)
	_, err = remote.Head(mustRef(t, host+"/bundle:v1"))
	require.Error(t, err)
}

func names(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

func mustRef(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := image.ParseReference(ref)
	require.NoError(t, err)
	return r
}

func TestOperatorCmd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/static")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	host := registry.Registry(t)

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
