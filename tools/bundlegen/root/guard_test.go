package root_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// writingVerbs are every bundlegen verb that writes a folder, each with the
// arguments that name its output (O) and its inputs in a repository copy.
// documents names its commit (the copy is not a git checkout).
var writingVerbs = []struct {
	name string
	args []string
}{
	{"bundle", []string{"bundle", "--output", "O"}},
	{"catalog", []string{"catalog", "-o", "O"}},
	{"graph", []string{"graph", "-o", "O"}},
	{"image bundle", []string{"image", "bundle", "bundle/inferencestack-crds/1.0.0", "--output", "O"}},
	{"image catalog", []string{"image", "catalog", "catalog", "--output", "O"}},
	{"image operator", []string{"image", "operator", "bin/manager", "--output", "O"}},
	{"documents bundle", []string{"documents", "bundle", "bundle/inferencestack-crds/1.0.0", "--image", "example.com/b", "--output", "O",
		"--commit", strings.Repeat("a", 40), "--commit-time", "0"}},
	{"documents catalog", []string{"documents", "catalog", "catalog", "--image", "example.com/c", "--output", "O",
		"--commit", strings.Repeat("a", 40), "--commit-time", "0"}},
	{"documents operator", []string{"documents", "operator", "bin/manager", "--image", "example.com/o", "--output", "O",
		"--commit", strings.Repeat("a", 40), "--commit-time", "0"}},
}

// badOutputs are the outputs no verb may write: each of the repository's
// protected folders (or a folder inside one, a frozen release's above all),
// a link out of the tree or a path through one, a named pipe, and `..`
// escapes out of the repository. want is what the message says after
// "--output <path>: ".
var badOutputs = []struct {
	name, out, want string
}{
	{"inside bundle/", "bundle/out", "refusing to write"},
	{"inside a frozen release's bundle", "bundle/inferencestack-crds/1.0.0/layout", "refusing to write"},
	{"inside catalog/", "catalog/out", "refusing to write"},
	{"inside a catalog package", "catalog/inferencestack-crds/out", "refusing to write"},
	{"inside channels/", "channels/out", "refusing to write"},
	{"inside channels/releases/", "channels/releases/sub", "refusing to write"},
	{"inside operator/config", "operator/config/out", "refusing to write"},
	{"a folder holding operator/config", "operator", "refusing to write"},
	{"a link out of the tree", "linkout", "is a symbolic link"},
	{"a folder through a link out of the tree", "linkout/sub", "is a symbolic link"},
	{"a named pipe", "pipe", "is a named pipe (FIFO), not a folder"},
	{"`..` out of the repository", "../escape", "refusing to write outside the repository"},
	{"`..` out of the repository through bundle/", "bundle/../../escape", "refusing to write outside the repository"},
}

// TestEveryVerbRefusesBadOutputs walks every writing verb with every kind of
// bad output path: each run fails naming the flag, the path and why, nothing
// in the repository or outside it changes, and nothing is written where the
// path points (runFS compares both trees; absent checks the escapes).
func TestEveryVerbRefusesBadOutputs(t *testing.T) {
	var tests []fsCase
	for _, v := range writingVerbs {
		for _, o := range badOutputs {
			args := make([]string, len(v.args))
			for i, a := range v.args {
				args[i] = strings.ReplaceAll(a, "O", o.out)
				if a != "O" {
					args[i] = a
				}
			}
			tests = append(tests, fsCase{
				name:   v.name + " --output " + o.name,
				setup:  guardSetup,
				args:   args,
				code:   1,
				want:   []string{"--output " + o.out + ": ", o.want},
				same:   []string{"OUT/file.yaml"},
				absent: []string{"../escape", "bundle/out", "catalog/out", "channels/out", "channels/releases/sub", "operator/config/out", "bundle/inferencestack-crds/1.0.0/layout"},
			})
		}
	}
	runFS(t, tests)
}

// guardSetup gives the repository copy an operator binary (bin/manager, a
// static ELF file: this test binary), a link to the outside folder and a
// named pipe.
func guardSetup(t *testing.T, r, outside string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(r, "bin"), 0o755))
	manager := filepath.Join(r, "bin", "manager")
	if err := os.Link(os.Args[0], manager); err != nil {
		src, err := os.Open(os.Args[0])
		require.NoError(t, err)
		defer src.Close()
		dst, err := os.Create(manager)
		require.NoError(t, err)
		_, err = io.Copy(dst, src)
		require.NoError(t, err)
		require.NoError(t, dst.Close())
	}
	require.NoError(t, os.Symlink(outside, filepath.Join(r, "linkout")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(r, "pipe"), 0o644))
}

// TestReadersRefuseWhatCouldBlockOrIsHalfWritten: the readers of the image
// verbs (image, documents, sign) and validate bundle refuse an input that is
// a named pipe (at once, without opening it), and an input under a folder
// a bundlegen write has its journal in (a write under way or stopped: its
// staged and backup files would be packed).
func TestReadersRefuseWhatCouldBlockOrIsHalfWritten(t *testing.T) {
	journal := func(t *testing.T, r, _ string) {
		require.NoError(t, os.MkdirAll(filepath.Join(r, "bundle/.bundlegen"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(r, "bundle/.bundlegen/journal"), []byte("bundlegen transaction journal v1\n{}"), 0o644))
	}
	pipe := func(t *testing.T, r, _ string) { require.NoError(t, syscall.Mkfifo(filepath.Join(r, "pipe"), 0o644)) }
	commit := []string{"--commit", strings.Repeat("a", 40), "--commit-time", "0"}
	runFS(t, []fsCase{
		{name: "image operator, a named pipe", setup: pipe, args: []string{"image", "operator", "pipe", "--output", "out"},
			code: 1, want: []string{"pipe is a named pipe (FIFO)"}},
		{name: "documents operator, a named pipe", setup: pipe,
			args: append([]string{"documents", "operator", "pipe", "--image", "example.com/o", "--output", "out"}, commit...),
			code: 1, want: []string{"pipe is a named pipe (FIFO)"}},
		{name: "image bundle during a write of bundle/", setup: journal,
			args: []string{"image", "bundle", "bundle/inferencestack-crds/1.0.0", "--output", "out"},
			code: 1, want: []string{"was being written by a bundlegen run", "bundle/.bundlegen/journal", "run `bundlegen bundle` again"}},
		{name: "documents bundle during a write of bundle/", setup: journal,
			args: append([]string{"documents", "bundle", "bundle/inferencestack-crds/1.0.0", "--image", "example.com/b", "--output", "out"}, commit...),
			code: 1, want: []string{"was being written by a bundlegen run", "bundle/.bundlegen/journal"}},
		{name: "validate bundle during a write of bundle/", setup: journal,
			args: []string{"validate", "bundle", "bundle/inferencestack-crds/1.0.0"},
			code: 1, want: []string{"was being written by a bundlegen run", "bundle/.bundlegen/journal"}},
	})
}

// TestGraphRefusesAPackageNameThatIsAPath: a catalog declaring a package
// whose name is a path (`../bundle/...`, `../x`) is refused before any path
// is built from it; nothing is written into the frozen bundle or beside -o.
func TestGraphRefusesAPackageNameThatIsAPath(t *testing.T) {
	var tests []fsCase
	for _, name := range []string{"../bundle/inferencestack-crds/1.0.0", "../x", "../channels"} {
		tests = append(tests, fsCase{name: name, setup: func(t *testing.T, r, _ string) {
			require.NoError(t, os.MkdirAll(filepath.Join(r, "catalog/evil"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(r, "catalog/evil/catalog.yaml"), []byte(
				"schema: olm.package\nname: "+name+"\n---\nschema: olm.channel\npackage: "+name+"\nname: stable\nentries:\n- name: evil.v1.0.0\n"+
					"---\nschema: olm.bundle\npackage: "+name+"\nname: evil.v1.0.0\nimage: example.com/evil@sha256:"+strings.Repeat("0", 64)+"\n"+
					"properties:\n- type: olm.package\n  value:\n    packageName: "+name+"\n    version: 1.0.0\n"), 0o644))
		}, args: []string{"graph"}, code: 1, want: []string{"package \"" + name + "\" is not a plain name"},
			absent: []string{"bundle/inferencestack-crds/1.0.0/graph.md", "x", "channels/graph.md"}})
	}
	runFS(t, tests)
}

// TestNothingChangedShips: pushing or signing a release's bundle (or the
// catalog) goes through `bundle --check`: a bundle whose CSV was edited, or
// holding a planted ClusterRole, is refused before any registry or key is
// used, naming the file.
func TestNothingChangedShips(t *testing.T) {
	editCSV := func(t *testing.T, r, _ string) {
		p := filepath.Join(r, "bundle/inferencestack-crds/1.0.0/manifests/inferencestack-crds.clusterserviceversion.yaml")
		require.NoError(t, os.WriteFile(p, []byte(readFile(t, p)+"# edited\n"), 0o644))
	}
	plant := func(t *testing.T, r, _ string) {
		require.NoError(t, os.WriteFile(filepath.Join(r, "bundle/inferencestack-operator/1.0.0/manifests/all.clusterrole.yaml"), []byte(
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: all\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n"), 0o644))
	}
	runFS(t, []fsCase{
		{name: "push a bundle whose CSV was edited", setup: editCSV,
			args: []string{"image", "bundle", "bundle/inferencestack-crds/1.0.0", "--push", "127.0.0.1:1/b:v1"},
			code: 1, want: []string{"refusing to push bundle/inferencestack-crds/1.0.0", "bundlegen bundle --check", "inferencestack-crds.clusterserviceversion.yaml"}},
		{name: "push a bundle with a planted ClusterRole", setup: plant,
			args: []string{"image", "bundle", "bundle/inferencestack-operator/1.0.0", "--push", "127.0.0.1:1/b:v1"},
			code: 1, want: []string{"refusing to push bundle/inferencestack-operator/1.0.0", "bundlegen bundle --check", "all.clusterrole.yaml"}},
		{name: "push the catalog while a bundle was edited", setup: editCSV,
			args: []string{"image", "catalog", "catalog", "--push", "127.0.0.1:1/c:v1"},
			code: 1, want: []string{"refusing to push catalog", "bundlegen bundle --check", "inferencestack-crds.clusterserviceversion.yaml"}},
		{name: "sign a bundle whose CSV was edited", setup: editCSV,
			args: []string{"sign", "bundle", "bundle/inferencestack-crds/1.0.0", "127.0.0.1:1/b:v1", "--key", "missing.key"},
			code: 1, want: []string{"refusing to sign bundle/inferencestack-crds/1.0.0", "bundlegen bundle --check", "inferencestack-crds.clusterserviceversion.yaml"}},
		{name: "sign a bundle with a planted ClusterRole", setup: plant,
			args: []string{"sign", "bundle", "bundle/inferencestack-operator/1.0.0", "127.0.0.1:1/b:v1", "--key", "missing.key"},
			code: 1, want: []string{"refusing to sign bundle/inferencestack-operator/1.0.0", "all.clusterrole.yaml"}},
	})
}
