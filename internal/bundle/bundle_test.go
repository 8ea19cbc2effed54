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

	"github.com/inferencestack/inferencestack/internal/atomicfs/atomicfstest"
)

var update = flag.Bool("update", false, "rewrite golden files")

const repo = "../.."

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
	return generate(root)
}

// generate is the Generate over a fixture root.
func generate(root string) Generate {
	return Generate{
		ReleasesDir: filepath.Join(root, "releases"),
		LockPath:    filepath.Join(root, "images.lock"),
		SumPath:     filepath.Join(root, "published.sum"),
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

func TestGolden(t *testing.T) {
	g := fixture(t, nil)
	res, err := g.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{StateWritten, StateWritten}, states(res))

	got := atomicfstest.Tree(t, g.OutputDir)
	golden := "testdata/golden/bundle"
	if *update {
		require.NoError(t, os.RemoveAll(golden))
		require.NoError(t, os.CopyFS(golden, os.DirFS(g.OutputDir)))
	}
	want := atomicfstest.Tree(t, golden)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("bundles differ from %s (-want +got); run go test -update:\n%s", golden, d)
	}
}

func TestRegenerateIsIdentical(t *testing.T) {
	g := fixture(t, nil)
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	first := atomicfstest.Tree(t, g.OutputDir)

	res, err := g.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{StateUnchanged, StateUnchanged}, states(res), "a second run must find the bundles identical")
	require.Equal(t, first, atomicfstest.Tree(t, g.OutputDir))

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

func states(res Result) []string {
	var out []string
	for _, b := range res.Bundles {
		out = append(out, b.State)
	}
	return out
}

func rewrite(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), old)
	require.NoError(t, os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644))
}

// TestErrors: the bad inputs tried; each is refused, naming the file, and
// bundle/ is untouched.
func TestErrors(t *testing.T) {
	const input = "releases/1.0.0.yaml"
	tests := []struct {
		name  string
		edit  func(t *testing.T, root string)
		setup func(g *Generate)
		want  []string
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
				rewrite(t, filepath.Join(root, input), "version: 1.0.0", "version: v1.0")
			},
			want: []string{"1.0.0.yaml: field version", `"v1.0" is not a semantic version`, "without a leading v"},
		},
		{
			name: "llamaStackVersion missing",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, input), "llamaStackVersion: 0.2.23\n", "")
			},
			want: []string{"1.0.0.yaml: field llamaStackVersion: missing"},
		},
		{
			name: "operand tag is not llamaStackVersion",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, input), "distribution-starter:0.2.23", "distribution-starter:0.3.0")
			},
			want: []string{"1.0.0.yaml: field operands.starter", `is "0.3.0", but llamaStackVersion is "0.2.23"`},
		},
		{
			name: "released version with a file bundlegen does not make",
			edit: func(t *testing.T, root string) {
				dir := filepath.Join(root, "bundle", PackageOperator, "1.0.0", "manifests")
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "old.yaml"), []byte("kind: ConfigMap\n"), 0o644))
			},
			want: []string{"inferencestack-operator/1.0.0 differs from what its inputs", "old.yaml extra", "--regenerate"},
		},
		{
			name: "regenerate never deletes a file it did not write",
			edit: func(t *testing.T, root string) {
				dir := filepath.Join(root, "bundle", PackageOperator, "1.0.0", "manifests")
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644))
			},
			setup: func(g *Generate) { g.Regenerate = true },
			want:  []string{"inferencestack-operator/1.0.0 holds files bundlegen does not generate (manifests/notes.txt)"},
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
				rewrite(t, filepath.Join(root, input),
					"docker.io/llamastack/distribution-starter:0.2.23", "docker.io/Llama Stack/starter:0.2.23")
			},
			want: []string{"1.0.0.yaml: field operands.starter", "does not parse"},
		},
		{
			name: "unknown distribution",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, input), "  starter:", "  startr:")
			},
			want: []string{"field operands.startr", `unknown distribution "startr"`, "starter"},
		},
		{
			name: "image the lock does not list",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, input), "docker.io/llamastack/distribution-starter:0.2.23", "mirror.example.com/starter:0.2.23")
			},
			want: []string{"1.0.0.yaml: field operands.starter", "mirror.example.com/starter:0.2.23 is not in the image lock", "--resolve", "unresolved"},
		},
		{
			name: "made-up digest in the lock",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, "images.lock"), "distribution-starter:0.2.23: unresolved", "distribution-starter:0.2.23: sha256:abc")
			},
			want: []string{"images.lock: images[docker.io/llamastack/distribution-starter:0.2.23]", `digest "sha256:abc"`},
		},
		{
			name: "published with unresolved images",
			edit: func(t *testing.T, root string) {
				rewrite(t, filepath.Join(root, input), "version: 1.0.0\n", "version: 1.0.0\npublished: true\n")
			},
			want: []string{"1.0.0.yaml says published: true", "has no line for release 1.0.0", "--publish 1.0.0"},
		},
		{
			name: "--version of another release while this one is missing",
			edit: func(t *testing.T, root string) {
				data, err := os.ReadFile(filepath.Join(root, input))
				require.NoError(t, err)
				data = bytes.ReplaceAll(data, []byte("version: 1.0.0"), []byte("version: 1.0.1"))
				require.NoError(t, os.WriteFile(filepath.Join(root, "releases", "1.0.1.yaml"), data, 0o644))
			},
			setup: func(g *Generate) { g.Version, g.AllowTags = "1.0.1", true },
			want:  []string{"inferencestack-crds/1.0.0 does not exist", "without --version"},
		},
		{
			name:  "output is an input folder",
			setup: func(g *Generate) { g.OutputDir = g.ReleasesDir },
			want:  []string{"--output ", "refusing to write to the input", "releases"},
		},
		{
			name:  "output above the inputs",
			setup: func(g *Generate) { g.OutputDir = filepath.Dir(g.ReleasesDir) },
			want:  []string{"refusing to write to the input"},
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
			g := fixture(t, func(root string) {
				if tc.edit != nil {
					tc.edit(t, root)
				}
			})
			if tc.setup != nil {
				tc.setup(&g)
			}
			before := atomicfstest.TreeIfExists(t, g.OutputDir)
			_, err := g.Run(context.Background())
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.Equal(t, before, atomicfstest.TreeIfExists(t, g.OutputDir), "bundle/ must be untouched on error")
		})
	}
}

// TestAllowTagsWarns: an image the lock does not list passes with
// --allow-tags, by tag, with a warning.
func TestAllowTagsWarns(t *testing.T) {
	g := fixture(t, func(root string) {
		rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"), "docker.io/llamastack/distribution-starter:0.2.23", "mirror.example.com/starter:0.2.23")
	})
	var warnings strings.Builder
	g.AllowTags, g.Warnings = true, &warnings
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	require.Contains(t, warnings.String(), "warning: image mirror.example.com/starter:0.2.23 is not in the image lock and ships by tag (--allow-tags)")
	pin, err := os.ReadFile(filepath.Join(g.OutputDir, PackageOperator, "1.0.0", "manifests", "inferencestack-operator-pin_v1_configmap.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(pin), "starter: mirror.example.com/starter:0.2.23")
}

// TestUnresolvedWarns: bundles built from unresolved lock entries carry the
// tags, and their validation warns about each, naming image and field.
func TestUnresolvedWarns(t *testing.T) {
	g := fixture(t, nil)
	res, err := g.Run(context.Background())
	require.NoError(t, err)
	var b strings.Builder
	for _, r := range res.Reports {
		r.Print(&b)
		require.False(t, r.HasErrors())
	}
	require.Contains(t, b.String(), "inferencestack-operator/1.0.0: warning [bundlegen] manifests/inferencestack-operator.clusterserviceversion.yaml "+
		"spec.install.spec.deployments[0].spec.template.spec.containers[0].env[3].value (RELATED_IMAGE_STARTER): "+
		"image docker.io/llamastack/distribution-starter:0.2.23 is named by tag, not digest (also in spec.relatedImages[3].image)")
	require.Contains(t, b.String(), "image quay.io/inferencestack/inferencestack-operator:v1.0.0 is named by tag")
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
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	for _, v := range []string{"1.0.0", "2.0.0"} {
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
// RELATED_IMAGE_CACHE and is listed in relatedImages (by tag while the lock
// records it as unresolved); LLAMA_STACK_VERSION follows the RELATED_IMAGE_
// variables.
func TestCacheImage(t *testing.T) {
	g := fixture(t, func(root string) {
		rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"), "operands:\n", "cacheImage: docker.io/library/postgres:16.4\noperands:\n")
		rewrite(t, filepath.Join(root, "images.lock"), "images:\n", "images:\n  docker.io/library/postgres:16.4: unresolved\n")
	})
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	csv, err := os.ReadFile(filepath.Join(g.OutputDir, PackageOperator, "1.0.0", "manifests", PackageOperator+".clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(csv), "- name: RELATED_IMAGE_CACHE\n                  value: docker.io/library/postgres:16.4\n"+
		"                - name: LLAMA_STACK_VERSION\n                  value: 0.2.23\n")
	require.Contains(t, string(csv), "- image: docker.io/library/postgres:16.4\n    name: cache\n")
}
