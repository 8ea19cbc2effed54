package root_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/tools/bundlegen/root"
)

// The inputs that used to pass silently or frozen releases that could still
// change (issue 22): one table per verb, each row run in process as a user
// types it. A row gives the command line (built in a fresh folder), the exit
// code bundlegen's main returns for it (0, or 1 on any error), fragments of
// its message (error, or output when they start with "out:"), and every
// file of the folder must be byte for byte what it was before the run.

// silentCase is one input of one verb.
type silentCase struct {
	name string
	// setup prepares dir, a fresh temporary folder, and returns the command
	// line; files it leaves in dir must not change.
	setup func(t *testing.T, dir string) []string
	// exit is the exit status main returns: 0, or 1 on any error.
	exit int
	// want are fragments of the error, or of the output when they start
	// with "out:".
	want []string
}

func runSilent(t *testing.T, tests []silentCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := tc.setup(t, dir)
			before := snapshot(t, dir)
			cmd := root.NewCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(args)
			err := cmd.Execute()
			exit := 0
			if err != nil {
				exit = 1 // tools/bundlegen/main.go
			}
			require.Equal(t, tc.exit, exit, "bundlegen %s: error %v; output:\n%s", strings.Join(args, " "), err, out.String())
			for _, w := range tc.want {
				if o, ok := strings.CutPrefix(w, "out:"); ok {
					require.Contains(t, out.String(), o)
					continue
				}
				require.ErrorContains(t, err, w)
			}
			require.Equal(t, before, snapshot(t, dir), "bundlegen %s changed files", strings.Join(args, " "))
		})
	}
}

// snapshot maps every file and folder under dir to a hash of its content
// (folders to "dir").
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(data)
		out[rel] = hex.EncodeToString(h[:])
		return nil
	}))
	return out
}

func copyInto(t *testing.T, src, dst string) string {
	t.Helper()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), old, "%s changed shape: fix the test", path)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644))
}

// releaseArgs is `bundlegen bundle` over the release inputs in in (a copy
// of testdata/in), writing dir/bundle and in/published.sum.
func releaseArgs(in, dir string, extra ...string) []string {
	return append([]string{"bundle",
		"--releases", in + "/releases", "--lock", in + "/images.lock", "--published", in + "/published.sum",
		"--crds", in + "/crd", "--rbac", in + "/rbac", "--samples", in + "/samples",
		"--manager", repo + "/operator/config/manager/manager.yaml",
		"--bases", repo + "/operator/config/manifests/bases",
		"--output", filepath.Join(dir, "bundle")}, extra...)
}

// setDigest writes digest (64 hex digits) for image in in/images.lock.
func setDigest(t *testing.T, in, image, digest string) {
	t.Helper()
	path := filepath.Join(in, "images.lock")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	key := "  " + image + ": sha256:"
	i := strings.Index(string(data), key)
	require.GreaterOrEqual(t, i, 0, "%s has no digest for %s", path, image)
	i += len(key)
	require.NoError(t, os.WriteFile(path, []byte(string(data[:i])+digest+string(data[i+64:])), 0o644))
}

// mustRun runs bundlegen and fails the test on an error.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	cmd := root.NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	require.NoError(t, cmd.Execute(), "bundlegen %s:\n%s", strings.Join(args, " "), out.String())
	return out.String()
}

// releasedTree makes dir/in (the bundle inputs, every image with a digest
// in the lock) and dir/bundle with release 1.0.0's bundles; published
// makes the release published and recorded in in/published.sum.
func releasedTree(t *testing.T, dir string, published bool) string {
	t.Helper()
	in := copyInto(t, bundleIn, filepath.Join(dir, "in"))
	lock, err := os.ReadFile(filepath.Join(in, "images.lock"))
	require.NoError(t, err)
	n := 0
	resolved := strings.ReplaceAll(string(lock), ": unresolved", ": DIGEST")
	for strings.Contains(resolved, "DIGEST") {
		n++
		resolved = strings.Replace(resolved, "DIGEST", "sha256:"+strings.Repeat(fmt.Sprintf("%x", n%16), 64), 1)
	}
	require.NoError(t, os.WriteFile(filepath.Join(in, "images.lock"), []byte(resolved), 0o644))
	mustRun(t, releaseArgs(in, dir)...)
	if published {
		replaceIn(t, filepath.Join(in, "releases", "1.0.0.yaml"), "version: 1.0.0\n", "version: 1.0.0\npublished: true\n")
		mustRun(t, releaseArgs(in, dir, "--publish", "1.0.0")...)
	}
	return in
}

func TestSilentBundle(t *testing.T) {
	runSilent(t, []silentCase{
		{name: "published.sum deleted, releaseDate edited, --regenerate", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, true)
			require.NoError(t, os.Remove(filepath.Join(in, "published.sum")))
			replaceIn(t, filepath.Join(in, "releases", "1.0.0.yaml"), `releaseDate: "2026-11-22T00:00:00Z"`, `releaseDate: "2026-12-24T00:00:00Z"`)
			return releaseArgs(in, dir, "--regenerate")
		}, want: []string{"releases/1.0.0.yaml says published: true", "published.sum has no line for release 1.0.0", "tampering", "git checkout --", "never regenerated"}},
		{name: "published.sum deleted, --check", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, true)
			require.NoError(t, os.Remove(filepath.Join(in, "published.sum")))
			return releaseArgs(in, dir, "--check")
		}, want: []string{"has no line for release 1.0.0", "bundlegen bundle --publish 1.0.0"}},
		{name: "1.0.0's lines removed from published.sum", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, true)
			data, err := os.ReadFile(filepath.Join(in, "published.sum"))
			require.NoError(t, err)
			lines := strings.SplitAfter(string(data), "\n")
			lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "1.0.0 ") })
			require.NoError(t, os.WriteFile(filepath.Join(in, "published.sum"), []byte(strings.Join(lines, "")), 0o644))
			return releaseArgs(in, dir)
		}, want: []string{"has no line for release 1.0.0"}},
		{name: "published.sum cannot be written: --publish fails, nothing written", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, false)
			replaceIn(t, filepath.Join(in, "releases", "1.0.0.yaml"), "version: 1.0.0\n", "version: 1.0.0\npublished: true\n")
			// A path that reads as absent but cannot be written, even as root.
			return append(releaseArgs(in, dir, "--publish", "1.0.0"), "--published", "/proc/bundlegen-silent-test/published.sum")
		}, want: []string{"recording release 1.0.0 in /proc/bundlegen-silent-test/published.sum", "nothing was written", "bundlegen bundle --publish 1.0.0"}},
		{name: "a published release's input renamed", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, true)
			require.NoError(t, os.Rename(filepath.Join(in, "releases", "1.0.0.yaml"), filepath.Join(in, "releases", "1.0.0.yaml.orig")))
			return releaseArgs(in, dir, "--check")
		}, want: []string{"release 1.0.0 is published", "releases/1.0.0.yaml.orig holds exactly its content: the input was renamed", "rename it back (git mv ", "releases/1.0.0.yaml)"}},
		{name: "a published release's input renamed into a folder", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, true)
			require.NoError(t, os.Mkdir(filepath.Join(in, "releases", "old"), 0o755))
			require.NoError(t, os.Rename(filepath.Join(in, "releases", "1.0.0.yaml"), filepath.Join(in, "releases", "old", "1.0.0.yaml")))
			return releaseArgs(in, dir, "--check")
		}, want: []string{"release 1.0.0 is published", "releases/old/1.0.0.yaml holds exactly its content: the input was renamed", "rename it back (git mv "}},
		{name: "a published release's input renamed as the next version", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, true)
			require.NoError(t, os.Rename(filepath.Join(in, "releases", "1.0.0.yaml"), filepath.Join(in, "releases", "1.0.1.yaml")))
			replaceIn(t, filepath.Join(in, "releases", "1.0.1.yaml"), "version: 1.0.0\n", "version: 1.0.1\n")
			return releaseArgs(in, dir, "--check")
		}, want: []string{"release 1.0.0 is published", "releases/1.0.1.yaml looks like it renamed and changed",
			"restore ", "releases/1.0.0.yaml from git (git checkout HEAD -- ", "give a new release an input of its own, without published: true"}},
		{name: "two releases say published: true, neither recorded, --publish one", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, false)
			data, err := os.ReadFile(filepath.Join(in, "releases", "1.0.0.yaml"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(in, "releases", "1.0.1.yaml"), []byte(strings.Replace(string(data), "version: 1.0.0\n", "version: 1.0.1\n", 1)), 0o644))
			for _, v := range []string{"1.0.0", "1.0.1"} {
				replaceIn(t, filepath.Join(in, "releases", v+".yaml"), "version: "+v+"\n", "version: "+v+"\npublished: true\n")
			}
			return releaseArgs(in, dir, "--publish", "1.0.1")
		}, want: []string{"releases 1.0.0, 1.0.1 all say published: true", "records one release per run", "keep published: true in one input only",
			"releases/1.0.0.yaml", "bundlegen bundle --publish 1.0.0`, then set published: true in the next and record it, one at a time"}},
		{name: "published: true, never recorded, plain run", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, false)
			replaceIn(t, filepath.Join(in, "releases", "1.0.0.yaml"), "version: 1.0.0\n", "version: 1.0.0\npublished: true\n")
			return releaseArgs(in, dir)
		}, want: []string{"has no line for release 1.0.0", "--publish 1.0.0"}},
		{name: "lock digest of a published image changed, --check", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, true)
			setDigest(t, in, "docker.io/llamastack/distribution-starter:0.2.23", strings.Repeat("f", 64))
			return releaseArgs(in, dir, "--check")
		}, want: []string{"published release 1.0.0: the image lock", "no longer gives the images its frozen bundle ships",
			"operand starter is index.docker.io/llamastack/distribution-starter@sha256:", "inferencestack-operator-pin_v1_configmap.yaml", "@sha256:ffff"}},
		{name: "orphan bundles: a release input deleted, its bundle folders left", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, false)
			for _, pkg := range []string{"inferencestack-crds", "inferencestack-operator"} {
				copyInto(t, filepath.Join(dir, "bundle", pkg, "1.0.0"), filepath.Join(dir, "bundle", pkg, "0.9.0"))
			}
			return releaseArgs(in, dir, "--check")
		}, want: []string{"bundle/inferencestack-crds/0.9.0", "bundle/inferencestack-operator/0.9.0: no release input", "releases/0.9.0.yaml is missing", "git rm -r"}},
	})
}

func TestSilentPin(t *testing.T) {
	pinArgs := func(in, dir string, extra ...string) []string {
		return append([]string{"pin", "--releases", in + "/releases", "--lock", in + "/images.lock", "--bundles", filepath.Join(dir, "bundle")}, extra...)
	}
	runSilent(t, []silentCase{
		{name: "published release, lock digest changed: prints what the bundle holds", exit: 0, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, true)
			setDigest(t, in, "docker.io/llamastack/distribution-starter:0.2.23", "0"+strings.Repeat("f", 63))
			return pinArgs(in, dir, "--version", "1.0.0")
		}, want: []string{"out:starter: index.docker.io/llamastack/distribution-starter@sha256:" + strings.Repeat("3", 64), // the bundle's, not the lock's
			"out:warning: release 1.0.0 is published and this is the pin its bundle ships",
			"out:in the bundle but index.docker.io/llamastack/distribution-starter@sha256:0fff"}},
		{name: "--resolve of a published release", exit: 1, setup: func(t *testing.T, dir string) []string {
			in := releasedTree(t, dir, true)
			return pinArgs(in, dir, "--version", "1.0.0", "--resolve")
		}, want: []string{"1.0.0.yaml says published: true: its images and their digests in the image lock are frozen", "only for unpublished releases"}},
	})
}

func TestSilentRBACCheck(t *testing.T) {
	args := func(rbacDir, releases, bundles string) []string {
		return []string{"rbac", "check", "--rbac", rbacDir,
			"--source", repo + "/operator/internal", "--applied-kinds", repo + "/operator/apply/kinds.go",
			"--releases", releases, "--bundles", bundles}
	}
	rbacDir := repo + "/operator/config/rbac"
	runSilent(t, []silentCase{
		{name: "malformed release input", exit: 1, setup: func(t *testing.T, dir string) []string {
			releases := copyInto(t, repo+"/channels/releases", filepath.Join(dir, "releases"))
			replaceIn(t, filepath.Join(releases, "1.0.0.yaml"), "minKubeVersion: 1.30.0", "minKubeVersion: 1.30.0\nminKubeVersoin: 1.31.0")
			return args(rbacDir, releases, repo+"/bundle")
		}, want: []string{"releases/1.0.0.yaml", `unknown field "minKubeVersoin"`}},
		{name: "--bundles nope", exit: 1, setup: func(_ *testing.T, dir string) []string {
			return args(rbacDir, repo+"/channels/releases", filepath.Join(dir, "nope"))
		}, want: []string{"--bundles ", "nope: not a folder", "no such file or directory"}},
		{name: "one rule dropped from role.yaml: the stale message names it", exit: 1, setup: func(t *testing.T, dir string) []string {
			drifted := copyInto(t, rbacDir, filepath.Join(dir, "rbac"))
			replaceIn(t, filepath.Join(drifted, "role.yaml"), "  - events\n  verbs:\n  - create\n  - patch\n", "  - events\n  verbs:\n  - create\n")
			return args(drifted, repo+"/channels/releases", repo+"/bundle")
		}, want: []string{"1 stale bundle field(s)",
			"out:the bundle grants, the RBAC manifests do not: inferencestack-operator-v4: apiGroups=events.k8s.io resources=events verbs=patch"}},
	})
}

func TestSilentCatalog(t *testing.T) {
	catalogArgs := func(repoDir, dir string) []string {
		// The demo bundles are not bundlegen's, so no release input checks them.
		return []string{"catalog", "--channels", filepath.Join(repoDir, "channels"), "--root", repoDir, "-o", filepath.Join(dir, "out"), "--verify-bundles=false"}
	}
	bridge := func(skipRange string) func(t *testing.T, dir string) []string {
		return func(t *testing.T, dir string) []string {
			repoDir := copyInto(t, "testdata/fbc", filepath.Join(dir, "repo"))
			extras := filepath.Join(repoDir, "channels", "demo-operator.release.yaml")
			data, err := os.ReadFile(extras)
			require.NoError(t, err)
			i := strings.Index(string(data), "bridges:")
			require.GreaterOrEqual(t, i, 0, "demo-operator.release.yaml has no bridges: fix the test")
			write(t, extras, string(data[:i])+"bridges:\n- bundle: 2.0.0\n  skipRange: \""+skipRange+"\"\n")
			return catalogArgs(repoDir, dir)
		}
	}
	runSilent(t, []silentCase{
		{name: "catalog extras without their template", exit: 1, setup: func(t *testing.T, dir string) []string {
			repoDir := copyInto(t, "testdata/fbc", filepath.Join(dir, "repo"))
			write(t, filepath.Join(repoDir, "channels", "demo-operatr.release.yaml"), "imageRefTemplate: quay.io/x/{{.Package}}:v{{.Version}}\n")
			return catalogArgs(repoDir, dir)
		}, want: []string{"channels/demo-operatr.release.yaml has no semver template", "demo-operatr.semver.yaml", "packages: demo-operator"}},
		{name: "bridge 2.0.0 from a later major", exit: 1, setup: bridge(">=7.0.0 <8.0.0"),
			want: []string{"demo-operator.release.yaml: bridges[0].skipRange", `the range admits 7.0.0, which is not below the bundle`, "a downgrade"}},
		{name: "bridge that admits no older version", exit: 1, setup: bridge(">=0.1.0 <0.2.0"),
			want: []string{`bridges[0].skipRange: ">=0.1.0 <0.2.0" admits no version of package "demo-operator" below the bundle 2.0.0`, `">=1.0.0 <2.0.0"`}},
	})
}

func TestSilentUpgrades(t *testing.T) {
	// The demo catalog: 1.0.0 1.0.1 1.1.0 in stable-v1, 2.0.0 (bridge
	// skipRange ">=1.0.0 <2.0.0") 2.1.0 in stable-v2.
	cat := repo + "/internal/fbc/testdata/golden"
	up := func(extra ...string) func(*testing.T, string) []string {
		return func(*testing.T, string) []string {
			return append([]string{"upgrades", "--catalog", cat, "--package", "demo-operator"}, extra...)
		}
	}
	runSilent(t, []silentCase{
		{name: `--channel ""`, exit: 1, setup: up("--from", "1.0.0", "--channel", ""), want: []string{`--channel "": an empty channel name`}},
		{name: "--version-range that admits nothing", exit: 1, setup: up("--from", "1.0.0", "--version-range", ">=5.0.0 <6.0.0"),
			want: []string{`--version-range ">=5.0.0 <6.0.0" admits no bundle of the package`, "versions: 1.0.0, 1.0.1, 1.1.0, 2.0.0, 2.1.0"}},
		{name: "installed version a skipRange holds, its bundle outside the channels", exit: 1, setup: up("--from", "1.5.0", "--channel", "stable-v1"),
			want: []string{`skipRange ">=1.0.0 <2.0.0" of bundle demo-operator.v2.0.0 in channel stable-v2 holds 1.5.0`, "none of the requested channels stable-v1"}},
		{name: "installed version a skipRange holds, its bundle outside the range", exit: 1, setup: up("--from", "1.5.0", "--version-range", "1.x"),
			want: []string{`its version 2.0.0 is outside --version-range "1.x"`}},
	})
}

func TestSilentValidateCatalog(t *testing.T) {
	runSilent(t, []silentCase{
		{name: "a CRD removed across an edge", exit: 1, setup: func(t *testing.T, dir string) []string {
			cfg, err := declcfg.LoadFS(t.Context(), os.DirFS(repo+"/internal/fbc/testdata/golden"))
			require.NoError(t, err)
			for i, b := range cfg.Bundles {
				if b.Name != "demo-operator.v2.0.0" {
					continue
				}
				cfg.Bundles[i].Properties = slices.DeleteFunc(b.Properties, func(p property.Property) bool {
					return p.Type == property.TypeBundleObject && bytes.Contains(p.Value, []byte(`"data":"eyJhcGlWZXJzaW9uIjoiYXBpZXh0ZW5zaW9ucy5r`)) // apiextensions.k8s.io: the CRD
				})
				require.Len(t, cfg.Bundles[i].Properties, len(b.Properties)-1, "one CRD object removed")
			}
			var out bytes.Buffer
			require.NoError(t, declcfg.WriteYAML(*cfg, &out))
			write(t, filepath.Join(dir, "catalog", "demo-operator", "catalog.yaml"), out.String())
			return []string{"validate", "catalog", filepath.Join(dir, "catalog")}
		}, want: []string{`out:bundle "demo-operator.v2.0.0": upgrade demo-operator.v1.1.0 -> demo-operator.v2.0.0 (skipRange ">=1.0.0 <2.0.0" in stable-v2) removes CRD demos.example.com`,
			"out:every Demo object", "finding(s)"}},
		{name: "a real opm-rendered catalog without CRD objects is valid, the skipped check said once", exit: 0, setup: func(t *testing.T, dir string) []string {
			copyInto(t, repo+"/internal/validate/testdata/opm-rendered/ecr-secret-operator", filepath.Join(dir, "catalog", "ecr-secret-operator"))
			return []string{"validate", "catalog", filepath.Join(dir, "catalog")}
		}, want: []string{"out:4 bundle(s) carry no objects", "out:the CRD upgrade-safety check (crdify) was skipped", "out:is valid"}},
	})
}
