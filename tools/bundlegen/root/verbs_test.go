package root

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVerbsRefuse: per verb, the bad inputs and outputs tried through the
// CLI; each is refused with a message naming the path, and nothing changes
// (the repository's channels/, bundle/ and catalog/ are compared before and
// after). The tests run in tools/bundlegen/root, a subfolder: the default
// paths are the repository's.
func TestVerbsRefuse(t *testing.T) {
	tmp := t.TempDir()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		// bundle
		{name: "bundle --output the channels folder", args: []string{"bundle", "--output", repo + "/channels"},
			want: []string{"--output " + repo + "/channels: refusing to write to the input"}},
		{name: "bundle --output .", args: []string{"bundle", "--output", "."}, want: []string{"--output .: refusing to write to the working folder"}},
		{name: "bundle --output ..", args: []string{"bundle", "--output", ".."}, want: []string{"--output ..: refusing to write to the working folder"}},
		{name: "bundle --output the repository root", args: []string{"bundle", "--output", repo}, want: []string{"or a folder above it"}},
		{name: "bundle --output the operator's config", args: []string{"bundle", "--output", repo + "/operator/config"},
			want: []string{"refusing to write to the input"}},
		{name: "bundle of a release that has no input", args: []string{"bundle", "--version", "9.9.9"},
			want: []string{"release 9.9.9", "channels/releases/9.9.9.yaml does not exist"}},
		// catalog
		{name: "catalog --output the channels folder", args: []string{"catalog", "-o", repo + "/channels"},
			want: []string{"refusing to write to the input"}},
		{name: "catalog --output .", args: []string{"catalog", "-o", "."}, want: []string{"--output .: refusing"}},
		{name: "catalog --output ..", args: []string{"catalog", "-o", ".."}, want: []string{"--output ..: refusing"}},
		{name: "catalog --output the repository root", args: []string{"catalog", "-o", repo}, want: []string{"or a folder above it"}},
		{name: "catalog --output a bundle folder", args: []string{"catalog", "-o", repo + "/bundle"}, want: []string{"refusing to write to the input"}},
		{name: "catalog of a bundle with no release input", args: []string{"catalog", "--channels", "testdata/fbc/channels",
			"--root", "testdata/fbc", "-o", filepath.Join(tmp, "catalog")},
			want: []string{"bundle testdata/fbc/bundle/demo-operator/1.0.0 is not the bundle of a release input"}},
		// image
		{name: "image catalog --output its input", args: []string{"image", "catalog", repo + "/catalog", "--output", repo + "/catalog"},
			want: []string{"refusing to write to the input"}},
		{name: "image catalog --output the channels folder", args: []string{"image", "catalog", repo + "/catalog", "--output", repo + "/channels"},
			want: []string{"refusing to write inside channels/ of the repository"}},
		{name: "image catalog --output ..", args: []string{"image", "catalog", repo + "/catalog", "--output", ".."},
			want: []string{"--output ..: refusing"}},
		{name: "image catalog --push with bundles by tag", args: []string{"image", "catalog", repo + "/catalog", "--push", "127.0.0.1:1/c:v1"},
			want: []string{"refusing to push", "is not pinned by digest"}},
		{name: "image bundle --push with images by tag", args: []string{"image", "bundle", repo + "/bundle/inferencestack-operator/2.0.0", "--push", "127.0.0.1:1/b:v1"},
			want: []string{"refusing to push", "docker.io/llamastack/distribution-starter:0.3.0 is named by tag, not digest"}},
		// pin
		{name: "pin of a release that has no input", args: []string{"pin", "--version", "9.9.9"}, want: []string{"channels/releases/9.9.9.yaml"}},
		// validate
		{name: "validate bundle --require-digests", args: []string{"validate", "bundle", "--require-digests", repo + "/bundle/inferencestack-operator/1.0.0"},
			want: []string{"1 of 1 bundles have errors"}},
		{name: "validate catalog --require-digests", args: []string{"validate", "catalog", "--require-digests"},
			want: []string{"finding(s)"}},
	}
	before := map[string]map[string]string{}
	for _, d := range []string{"channels", "bundle", "catalog"} {
		before[d] = readTree(t, filepath.Join(repo, d))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			for d, tree := range before {
				require.Equal(t, tree, readTree(t, filepath.Join(repo, d)), "%s changed", d)
			}
		})
	}
}

// TestVerbsFromSubfolder: run from a subfolder of the repository, every verb
// reads the repository's files; outside any repository each says it must run
// inside one (or be given the paths).
func TestVerbsFromSubfolder(t *testing.T) {
	out := t.TempDir()
	for _, args := range [][]string{
		{"bundle", "--check"},
		{"pin", "--version", "1.0.0"},
		{"catalog", "-o", filepath.Join(out, "catalog")},
		{"validate", "catalog"},
		{"graph", "-o", filepath.Join(out, "graph")},
		{"upgrades", "--from", "1.0.0"},
		{"rbac", "check"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Chdir(filepath.Join(repo, "operator", "api"))
			_, _, err := run(t, args...)
			require.NoError(t, err)
			t.Chdir(t.TempDir())
			_, _, err = run(t, args...)
			require.ErrorContains(t, err, "not inside the Inference Stack repository")
			require.ErrorContains(t, err, "run it inside the Inference Stack repository, or give")
		})
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = string(data)
		return err
	}))
	return out
}
