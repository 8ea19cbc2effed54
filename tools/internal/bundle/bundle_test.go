package bundle

import (
	"bytes"
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files")

const repo = "../../.."

// fixture copies testdata/in into a temporary directory and returns a
// Generate over it (the base CSVs and manager Deployment are the repo's).
func fixture(t *testing.T, edit func(root string)) Generate {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.CopyFS(root, os.DirFS("testdata/in")))
	for _, p := range []string{"operator/config/manager/manager.yaml", "operator/config/manifests/bases"} {
		require.NoError(t, copyPath(filepath.Join(repo, p), filepath.Join(root, filepath.Base(p))))
	}
	if edit != nil {
		edit(root)
	}
	return Generate{
		ReleasesDir: filepath.Join(root, "releases"),
		LockPath:    filepath.Join(root, "images.lock"),
		CRDDir:      filepath.Join(root, "crd"),
		RBACDir:     filepath.Join(root, "rbac"),
		ManagerPath: filepath.Join(root, "manager.yaml"),
		SamplesDir:  filepath.Join(root, "samples"),
		BasesDir:    filepath.Join(root, "bases"),
		OutputDir:   filepath.Join(root, "bundle"),
	}
}

func copyPath(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return os.CopyFS(dst, os.DirFS(src))
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	}))
	return out
}

func TestGolden(t *testing.T) {
	g := fixture(t, nil)
	res, err := g.Run(context.Background())
	require.NoError(t, err)
	require.ElementsMatch(t, []string{PackageCRDs, PackageOperator}, res.Written)

	got := readTree(t, g.OutputDir)
	golden := "testdata/golden/bundle"
	if *update {
		require.NoError(t, os.RemoveAll(golden))
		require.NoError(t, os.CopyFS(golden, os.DirFS(g.OutputDir)))
	}
	want := readTree(t, golden)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("bundles differ from %s (-want +got); run go test -update:\n%s", golden, d)
	}
}

func TestRegenerateIsIdentical(t *testing.T) {
	g := fixture(t, nil)
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	first := readTree(t, g.OutputDir)

	res, err := g.Run(context.Background())
	require.NoError(t, err)
	require.Empty(t, res.Written, "a second run must find the bundles identical")
	require.Equal(t, first, readTree(t, g.OutputDir))

	g.Check = true
	_, err = g.Run(context.Background())
	require.NoError(t, err)
}

func TestCheckFailsWhenMissing(t *testing.T) {
	g := fixture(t, nil)
	g.Check = true
	_, err := g.Run(context.Background())
	require.ErrorContains(t, err, "does not exist: run `make bundle`")
	_, statErr := os.Stat(filepath.Join(g.OutputDir, PackageCRDs))
	require.ErrorIs(t, statErr, fs.ErrNotExist)
}

func rewrite(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), old)
	require.NoError(t, os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644))
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(t *testing.T, root string)
		tags bool
		want []string
	}{
		{
			name: "missing base CSV",
			edit: func(t *testing.T, root string) {
				require.NoError(t, os.Remove(filepath.Join(root, "bases", PackageOperator+".clusterserviceversion.yaml")))
			},
			want: []string{"base CSV", "inferencestack-operator.clusterserviceversion.yaml does not exist", "create it"},
		},
		{
			name: "invalid semver",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"), "version: 1.0.0", "version: v1.0")
			},
			want: []string{"1.0.0.yaml: field version", `"v1.0" is not a semantic version`, "without a leading v"},
		},
		{
			name: "released version with different content",
			edit: func(t *testing.T, root string) {
				dir := filepath.Join(root, "bundle", PackageOperator, "1.0.0", "manifests")
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "old.yaml"), []byte("kind: ConfigMap\n"), 0o644))
			},
			want: []string{"inferencestack-operator/1.0.0 already exists with different content", "old.yaml extra",
				"released bundles are never rewritten", "channels/releases/<next version>.yaml"},
		},
		{
			name: "deployment without the operator container",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, "manager.yaml"), "- name: manager", "- name: controller")
			},
			want: []string{"manager.yaml: Deployment inferencestack-operator", `no container named "manager"`},
		},
		{
			name: "image reference that does not parse",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"),
					"quay.io/inferencestack/distribution-starter:0.2.23", "quay.io/Inference Stack/starter:0.2.23")
			},
			want: []string{"1.0.0.yaml: field operands.starter", "does not parse"},
		},
		{
			name: "unknown distribution",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"), "  starter:", "  startr:")
			},
			want: []string{"field operands.startr", `unknown distribution "startr"`, "starter"},
		},
		{
			name: "tag without digest",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"), "distribution-starter:0.2.23", "distribution-starter:0.3.0")
			},
			want: []string{"field operands.starter", "distribution-starter:0.3.0 has no digest", "--resolve", "--allow-tags"},
		},
		{
			name: "role binding to a role that does not exist",
			edit: func(t *testing.T, root string) {
				require.NoError(t, os.Remove(filepath.Join(root, "rbac", "role.yaml")))
			},
			want: []string{`ClusterRole "inferencestack-operator" is not among the RBAC manifests`, "make manifests"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := fixture(t, func(root string) { tc.edit(t, root) })
			g.AllowTags = tc.tags
			before := readTreeIfExists(t, g.OutputDir)
			_, err := g.Run(context.Background())
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.Equal(t, before, readTreeIfExists(t, g.OutputDir), "bundle/ must be untouched on error")
		})
	}
}

func TestAllowTagsWarns(t *testing.T) {
	g := fixture(t, func(root string) {
		rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"), "distribution-starter:0.2.23", "distribution-starter:0.3.0")
	})
	var warnings strings.Builder
	g.AllowTags, g.Warnings = true, &warnings
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	require.Contains(t, warnings.String(), "warning: image quay.io/inferencestack/distribution-starter:0.3.0 is pinned by tag")
	pin, err := os.ReadFile(filepath.Join(g.OutputDir, PackageOperator, "1.0.0", "manifests", "inferencestack-operator-pin_v1_configmap.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(pin), "starter: quay.io/inferencestack/distribution-starter:0.3.0")
}

func TestBaseFieldsSurvive(t *testing.T) {
	g := fixture(t, func(root string) {
		rewrite(t, filepath.Join(root, "bases", PackageOperator+".clusterserviceversion.yaml"), "  maturity: alpha\n",
			"  maturity: alpha\n  relatedImages:\n    - name: extra-tool\n      image: quay.io/inferencestack/tool@sha256:"+strings.Repeat("c", 64)+"\n")
		rewrite(t, filepath.Join(root, "bases", PackageOperator+".clusterserviceversion.yaml"), "  annotations:\n",
			"  annotations:\n    example.com/custom: kept\n    createdAt: \"2000-01-01T00:00:00Z\"\n")
		rewrite(t, filepath.Join(root, "bases", PackageCRDs+".clusterserviceversion.yaml"), "  install:\n",
			"  customresourcedefinitions:\n    owned:\n      - name: inferencestacks.inferencestack.io\n        version: v1alpha1\n        kind: InferenceStack\n        displayName: Llama Stack\n        description: Hand-written.\n  install:\n")
	})
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	op, err := os.ReadFile(filepath.Join(g.OutputDir, PackageOperator, "1.0.0", "manifests", PackageOperator+".clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(op), "name: extra-tool")
	require.Contains(t, string(op), "example.com/custom: kept")
	require.Contains(t, string(op), `createdAt: "2026-11-22T00:00:00Z"`, "createdAt comes from the release input")
	crds, err := os.ReadFile(filepath.Join(g.OutputDir, PackageCRDs, "1.0.0", "manifests", PackageCRDs+".clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(crds), "displayName: Llama Stack")
	require.Contains(t, string(crds), "description: Hand-written.")
}

func readTreeIfExists(t *testing.T, dir string) map[string]string {
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	return readTree(t, dir)
}

// TestTakesUnlabeledStacks: a release that does not take unlabelled stacks
// runs its operator with --take-unlabeled-stacks=false; one that does (the
// default) leaves the operator's default, true. Of the newest release of each
// major exactly one takes them.
func TestTakesUnlabeledStacks(t *testing.T) {
	second := func(v1, v2 string) func(root string) {
		return func(root string) {
			releases := filepath.Join(root, "releases")
			rewrite(t, filepath.Join(releases, "1.0.0.yaml"), "operands:\n", v1+"operands:\n")
			data, err := os.ReadFile(filepath.Join(releases, "1.0.0.yaml"))
			require.NoError(t, err)
			data = bytes.ReplaceAll(data, []byte("1.0.0"), []byte("2.0.0"))
			data = bytes.Replace(data, []byte(v1+"operands:\n"), []byte(v2+"operands:\n"), 1)
			require.NoError(t, os.WriteFile(filepath.Join(releases, "2.0.0.yaml"), data, 0o644))
		}
	}
	const no = "takesUnlabeledStacks: false\n"
	g := fixture(t, second("", no))
	g.AllowTags = true
	for _, v := range []string{"1.0.0", "2.0.0"} {
		g.Version = v
		_, err := g.Run(context.Background())
		require.NoError(t, err)
		csv, err := os.ReadFile(filepath.Join(g.OutputDir, PackageOperator, v, "manifests", PackageOperator+".clusterserviceversion.yaml"))
		require.NoError(t, err)
		require.Equal(t, v == "2.0.0", strings.Contains(string(csv), "- "+TakeUnlabeledFlag+"=false"), "release %s", v)
	}

	for _, tc := range []struct{ v1, v2, want string }{
		{"", "", "set takesUnlabeledStacks: false in all but one"},
		{no, no, "no major takes InferenceStacks"},
	} {
		g := fixture(t, second(tc.v1, tc.v2))
		g.AllowTags = true
		_, err := g.Run(context.Background())
		require.ErrorContains(t, err, tc.want)
		require.ErrorContains(t, err, "2.0.0.yaml")
	}
}

// TestCacheImage: a release's cacheImage reaches the operator as
// RELATED_IMAGE_CACHE and is listed in relatedImages (by digest when locked).
func TestCacheImage(t *testing.T) {
	g := fixture(t, func(root string) {
		rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"), "operands:\n", "cacheImage: docker.io/library/postgres:16.4\noperands:\n")
	})
	var warnings strings.Builder
	g.AllowTags, g.Warnings = true, &warnings
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	require.Contains(t, warnings.String(), "docker.io/library/postgres:16.4 is pinned by tag")
	csv, err := os.ReadFile(filepath.Join(g.OutputDir, PackageOperator, "1.0.0", "manifests", PackageOperator+".clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(csv), "- name: RELATED_IMAGE_CACHE\n                  value: docker.io/library/postgres:16.4\n")
	require.Contains(t, string(csv), "- image: docker.io/library/postgres:16.4\n    name: cache\n")
}
