package root_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/tools/bundlegen/root"
)

// The bad inputs each verb must refuse: one table per verb, every row run
// in process as a user types it. A row passes only when the command fails
// and its error (or output) holds every wanted fragment: the file, field or
// object at fault and what to do.

const repo = "../../.."

// bundleIn is the input tree of the bundle tests (crd/, rbac/, releases/,
// samples/, images.lock).
const bundleIn = "testdata/in"

type badInput struct {
	name string
	// args builds the command line; dir is a fresh temporary folder.
	args func(t *testing.T, dir string) []string
	// want are fragments of the error message, or of the output when they
	// start with "out:".
	want []string
}

func runBad(t *testing.T, tests []badInput) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args(t, t.TempDir())
			out, err := run(t, args...)
			require.Error(t, err, "bundlegen %s exited 0; output:\n%s", strings.Join(args, " "), out)
			for _, w := range tc.want {
				if o, ok := strings.CutPrefix(w, "out:"); ok {
					require.Contains(t, out, o)
					continue
				}
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func fixed(args ...string) func(*testing.T, string) []string {
	return func(*testing.T, string) []string { return args }
}

// copyTree copies src into dir/name and returns it.
func copyTree(t *testing.T, src, dir, name string) string {
	t.Helper()
	dst := filepath.Join(dir, name)
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

func write(t *testing.T, path, data string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
}

// groupVerbs returns the command path of every bundlegen command below the
// root that only holds subcommands.
func groupVerbs() [][]string {
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			p := append(append([]string{}, path...), sub.Name())
			if sub.HasSubCommands() {
				out = append(out, p)
				walk(sub, p)
			}
		}
	}
	walk(root.NewCmd(), nil)
	return out
}

func TestBadInputSubcommands(t *testing.T) {
	tests := []badInput{
		{name: "validate catlog catalog", args: fixed("validate", "catlog", "catalog"),
			want: []string{`bundlegen validate: unknown subcommand "catlog" (did you mean "catalog"?)`, "use one of bundle, catalog"}},
		{name: "rbac chek", args: fixed("rbac", "chek"), want: []string{`unknown subcommand "chek" (did you mean "check"?)`}},
		{name: "image bundel", args: fixed("image", "bundel", "dir"), want: []string{`unknown subcommand "bundel" (did you mean "bundle"?)`}},
		{name: "unknown verb", args: fixed("chek"), want: []string{`unknown command "chek"`}},
	}
	groups := groupVerbs()
	require.NotEmpty(t, groups)
	for _, g := range groups {
		tests = append(tests,
			badInput{name: strings.Join(g, " ") + " without a subcommand", args: fixed(g...),
				want: []string{"bundlegen " + strings.Join(g, " ") + " needs a subcommand: one of "}},
			badInput{name: strings.Join(g, " ") + " nosuch", args: fixed(append(g, "nosuch")...),
				want: []string{`unknown subcommand "nosuch"`}},
		)
	}
	runBad(t, tests)
}

func TestBadInputValidateCatalog(t *testing.T) {
	runBad(t, []badInput{
		{name: "empty folder", args: func(_ *testing.T, dir string) []string { return []string{"validate", "catalog", dir} },
			want: []string{"holds no file-based catalog objects", "give the catalog's root directory"}},
		{name: "folder of other YAML", args: func(t *testing.T, dir string) []string {
			write(t, filepath.Join(dir, "notes.yaml"), "hello: world\n")
			return []string{"validate", "catalog", dir}
		}, want: []string{"load catalog", "missing root schema field"}},
		{name: "missing folder", args: func(_ *testing.T, dir string) []string {
			return []string{"validate", "catalog", filepath.Join(dir, "nope")}
		}, want: []string{"load catalog", "nope"}},
		{name: "two folders", args: fixed("validate", "catalog", "a", "b"), want: []string{"accepts at most 1 arg"}},
		{name: "bad output", args: fixed("validate", "catalog", "-o", "yaml", "catalog"), want: []string{`--output "yaml"`}},
	})
}

func TestBadInputValidateBundle(t *testing.T) {
	runBad(t, []badInput{
		{name: "no folder", args: fixed("validate", "bundle"), want: []string{"requires at least 1 arg"}},
		{name: "a missing folder among good ones", args: func(t *testing.T, dir string) []string {
			return []string{"validate", "bundle", repo + "/bundle/inferencestack-crds/1.0.0", filepath.Join(dir, "nope"), repo + "/bundle/inferencestack-operator/1.0.0"}
		}, want: []string{
			"1 of 3 bundles have errors",
			"out:inferencestack-crds/1.0.0: 0 errors",
			"out:nope: error [bundlegen] ", // the missing folder is reported in its place
			"out:is not a readable registry+v1 bundle directory",
			"out:inferencestack-operator/1.0.0: 0 errors",
		}},
		{name: "a file, not a folder", args: func(t *testing.T, dir string) []string {
			write(t, filepath.Join(dir, "csv.yaml"), "kind: ClusterServiceVersion\n")
			return []string{"validate", "bundle", filepath.Join(dir, "csv.yaml")}
		}, want: []string{"1 of 1 bundles have errors", "out:csv.yaml: error [bundlegen]"}},
		{name: "bad output", args: fixed("validate", "bundle", "-o", "yaml", "x"), want: []string{`--output "yaml"`}},
	})
}

func TestBadInputGraph(t *testing.T) {
	runBad(t, []badInput{
		{name: "empty catalog", args: func(_ *testing.T, dir string) []string { return []string{"graph", "--catalog", dir} },
			want: []string{"has no package", "no graph to draw", "--catalog"}},
		{name: "missing catalog", args: func(_ *testing.T, dir string) []string {
			return []string{"graph", "--catalog", filepath.Join(dir, "nope")}
		}, want: []string{"load catalog", "nope"}},
		{name: "unknown package", args: func(_ *testing.T, dir string) []string {
			return []string{"graph", "--catalog", repo + "/catalog", "--output", dir, "--package", "nope"}
		}, want: []string{`has no package "nope"`}},
		{name: "positional argument", args: fixed("graph", "catalog"), want: []string{`unknown command "catalog"`}},
	})
}

func TestBadInputUpgrades(t *testing.T) {
	cat := repo + "/catalog"
	runBad(t, []badInput{
		{name: "no --from", args: fixed("upgrades", "--catalog", cat), want: []string{`required flag(s) "from"`}},
		{name: "--from not semver", args: fixed("upgrades", "--catalog", cat, "--from", "one"), want: []string{`--from "one" is not a semver version`}},
		{name: "--from neither in the catalog nor in a skipRange", args: fixed("upgrades", "--catalog", cat, "--from", "0.9.0"),
			want: []string{`package "inferencestack-operator" has no bundle with version 0.9.0`, "no skipRange", "versions: 1.0.0, 2.0.0"}},
		{name: "unknown package", args: fixed("upgrades", "--catalog", cat, "--from", "1.0.0", "--package", "nope"),
			want: []string{`no package "nope"`, "--package"}},
		{name: "unknown channel", args: fixed("upgrades", "--catalog", cat, "--from", "1.0.0", "--channel", "fast-v9"),
			want: []string{`has no channel "fast-v9"`}},
		{name: "bad range", args: fixed("upgrades", "--catalog", cat, "--from", "1.0.0", "--version-range", "~>banana"),
			want: []string{`--version-range "~>banana" is not a valid range`}},
		{name: "empty catalog", args: func(_ *testing.T, dir string) []string {
			return []string{"upgrades", "--catalog", dir, "--from", "1.0.0"}
		},
			want: []string{"no package (olm.package)", "--catalog"}},
		{name: "bad output", args: fixed("upgrades", "--catalog", cat, "--from", "1.0.0", "-o", "yaml"), want: []string{`--output "yaml"`}},
	})
}

// rbacArgs checks the repository's RBAC and releases against bundles.
func rbacArgs(rbacDir, bundles string, extra ...string) []string {
	return append([]string{"rbac", "check", "--rbac", rbacDir,
		"--source", repo + "/operator/internal", "--applied-kinds", repo + "/operator/apply/kinds.go",
		"--releases", repo + "/channels/releases", "--bundles", bundles}, extra...)
}

// rbacWith copies the repository's RBAC manifests with role.yaml edited.
func rbacWith(t *testing.T, dir, old, new string) string {
	t.Helper()
	out := copyTree(t, repo+"/operator/config/rbac", dir, "rbac")
	data, err := os.ReadFile(filepath.Join(out, "role.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(data), old, "role.yaml changed shape: fix the test")
	write(t, filepath.Join(out, "role.yaml"), strings.Replace(string(data), old, new, 1))
	return out
}

func TestBadInputRBACCheck(t *testing.T) {
	rbacDir := repo + "/operator/config/rbac"
	runBad(t, []badInput{
		{name: "--version of no release", args: fixed(rbacArgs(rbacDir, repo+"/bundle", "--version", "7.0.0")...),
			want: []string{"--version 7.0.0: no release input", "7.0.0.yaml", "releases in", "1.0.0, 2.0.0"}},
		{name: "--version of a release without bundles", args: func(_ *testing.T, dir string) []string {
			return rbacArgs(rbacDir, dir, "--version", "1.0.0")
		}, want: []string{"1 stale bundle field(s)", "out:no bundle for release 1.0.0", "out:run `make bundle`"}},
		{name: "rule with verbs: []", args: func(t *testing.T, dir string) []string {
			return rbacArgs(rbacWith(t, dir, "  - poddisruptionbudgets\n  verbs:\n  - create\n  - delete\n  - get\n  - list\n  - patch\n  - update\n  - watch\n", "  - poddisruptionbudgets\n  verbs: []\n"), repo+"/bundle")
		}, want: []string{"role.yaml: ClusterRole inferencestack-operator: rules[", "].verbs: empty: name at least one verb", "make manifests"}},
		{name: "rule without resources", args: func(t *testing.T, dir string) []string {
			return rbacArgs(rbacWith(t, dir, "  resources:\n  - poddisruptionbudgets\n", "  resources: []\n"), repo+"/bundle")
		}, want: []string{"].resources: empty"}},
		{name: "missing RBAC folder", args: func(_ *testing.T, dir string) []string { return rbacArgs(filepath.Join(dir, "nope"), repo+"/bundle") },
			want: []string{"RBAC manifests", "nope"}},
		{name: "positional argument", args: fixed("rbac", "check", "operator/config/rbac"), want: []string{`unknown command "operator/config/rbac"`}},
		{name: "bad output", args: fixed(rbacArgs(rbacDir, repo+"/bundle", "-o", "yaml")...), want: []string{`--output "yaml"`}},
	})
}

// bundleArgs generates the bundles of in into dir/bundle.
func bundleArgs(in, dir string, extra ...string) []string {
	return append([]string{"bundle",
		"--releases", in + "/releases", "--lock", in + "/images.lock",
		"--crds", in + "/crd", "--rbac", in + "/rbac", "--samples", in + "/samples",
		"--manager", repo + "/operator/config/manager/manager.yaml",
		"--bases", repo + "/operator/config/manifests/bases",
		"--output", filepath.Join(dir, "bundle")}, extra...)
}

func TestBadInputBundle(t *testing.T) {
	runBad(t, []badInput{
		{name: "non-CRD file in the CRD folder", args: func(t *testing.T, dir string) []string {
			in := copyTree(t, bundleIn, dir, "in")
			write(t, filepath.Join(in, "crd", "extra.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
			return bundleArgs(in, dir)
		}, want: []string{"extra.yaml: a ConfigMap in the CRD directory", "move the file out of it"}},
		{name: "release input with build metadata", args: func(t *testing.T, dir string) []string {
			in := copyTree(t, bundleIn, dir, "in")
			data, err := os.ReadFile(filepath.Join(in, "releases", "1.0.0.yaml"))
			require.NoError(t, err)
			write(t, filepath.Join(in, "releases", "1.0.0+dup.yaml"), strings.Replace(string(data), "version: 1.0.0", "version: 1.0.0+dup", 1))
			return bundleArgs(in, dir)
		}, want: []string{"1.0.0+dup.yaml: version 1.0.0+dup has build metadata (+dup)", "it equals 1.0.0", "give a changed release a new version"}},
		{name: "--lock naming a missing file", args: func(t *testing.T, dir string) []string {
			return append(bundleArgs(bundleIn, dir), "--lock", filepath.Join(dir, "images.lok"))
		}, want: []string{"images.lok does not exist", "check --lock"}},
		{name: "--version of no release", args: func(_ *testing.T, dir string) []string { return bundleArgs(bundleIn, dir, "--version", "9.9.9") },
			want: []string{"release 9.9.9", "does not exist"}},
		{name: "role rule with verbs: []", args: func(t *testing.T, dir string) []string {
			in := copyTree(t, bundleIn, dir, "in")
			data, err := os.ReadFile(filepath.Join(in, "rbac", "role.yaml"))
			require.NoError(t, err)
			edited := strings.Replace(string(data), "rules:\n", "rules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: []\n", 1)
			require.NotEqual(t, string(data), edited)
			write(t, filepath.Join(in, "rbac", "role.yaml"), edited)
			return bundleArgs(in, dir)
		}, want: []string{"role.yaml: ClusterRole inferencestack-operator: rules[0].verbs: empty"}},
	})
}

func TestBadInputPin(t *testing.T) {
	runBad(t, []badInput{
		{name: "--lock naming a missing file", args: func(_ *testing.T, dir string) []string {
			return []string{"pin", "--releases", bundleIn + "/releases", "--lock", filepath.Join(dir, "images.lok")}
		}, want: []string{"images.lok does not exist", "check --lock", "bundlegen pin --resolve"}},
		{name: "--lock naming a missing file, tags allowed", args: func(_ *testing.T, dir string) []string {
			return []string{"pin", "--releases", bundleIn + "/releases", "--lock", filepath.Join(dir, "images.lok"), "--allow-tags"}
		}, want: []string{"images.lok does not exist"}},
		{name: "release input with build metadata", args: func(t *testing.T, dir string) []string {
			in := copyTree(t, bundleIn, dir, "in")
			write(t, filepath.Join(in, "releases", "2.0.0+dup.yaml"), "version: 2.0.0+dup\n")
			return []string{"pin", "--releases", in + "/releases", "--lock", in + "/images.lock"}
		}, want: []string{"2.0.0+dup.yaml: version 2.0.0+dup has build metadata"}},
	})
}

func TestBadInputCatalog(t *testing.T) {
	testdata := "testdata/fbc"
	runBad(t, []badInput{
		{name: "bundle folder the template does not list", args: func(t *testing.T, dir string) []string {
			rootDir := copyTree(t, testdata, dir, "repo")
			template := filepath.Join(rootDir, "channels", "demo-operator.semver.yaml")
			data, err := os.ReadFile(template)
			require.NoError(t, err)
			write(t, template, strings.ReplaceAll(string(data), "  - image: bundle/demo-operator/2.1.0\n", ""))
			return []string{"catalog", "--channels", filepath.Join(rootDir, "channels"), "--root", rootDir, "-o", filepath.Join(dir, "out")}
		}, want: []string{"demo-operator.semver.yaml does not list the bundle directories", "bundle/demo-operator/2.1.0", "add each as `- image: <directory>`"}},
		{name: "no templates", args: func(_ *testing.T, dir string) []string {
			return []string{"catalog", "--channels", dir, "-o", filepath.Join(dir, "out")}
		},
			want: []string{"no *.semver.yaml templates"}},
	})
}
