//go:build linux

package atomicfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func tree(t *testing.T, dir string) map[string]string {
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

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "a.yaml")
	var steps []string
	ctx := WithHook(context.Background(), func(_, step string) { steps = append(steps, step) })
	require.NoError(t, WriteFile(ctx, path, []byte("one")))
	require.Equal(t, []string{StepJournal, StepStage, StepCommit, StepRename, StepDone}, steps)
	// Files beside it stay, whatever their names look like.
	for _, name := range []string{".a.yaml.bundlegen-tmp-1", ".a.yaml.tmp-123", "keep.yaml", ".b.yaml.bundlegen-tmp-2"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", name), nil, 0o644))
	}
	steps = nil
	require.NoError(t, WriteFile(ctx, path, []byte("two")))
	require.Equal(t, []string{StepJournal, StepStage, StepBackup, StepCommit, StepRename, StepRemoveOld, StepDone}, steps)
	require.Equal(t, map[string]string{"a.yaml": "two", "keep.yaml": "", ".a.yaml.bundlegen-tmp-1": "", ".a.yaml.tmp-123": "", ".b.yaml.bundlegen-tmp-2": ""},
		tree(t, filepath.Join(dir, "sub")))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o644), fi.Mode().Perm())
}

func TestReplaceDir(t *testing.T) {
	for _, exchangeWorks := range []bool{true, false} {
		t.Run(map[bool]string{true: "exchange", false: "two renames"}[exchangeWorks], func(t *testing.T) {
			if !exchangeWorks {
				orig := exchangeFunc
				exchangeFunc = func(string, string) error { return unix.EINVAL } // what renameat2 says where it cannot exchange
				t.Cleanup(func() { exchangeFunc = orig })
			}
			parent := t.TempDir()
			target := filepath.Join(parent, "layout")
			// The user's files beside the target, named like its staging
			// folders but not made by it, stay.
			for _, name := range []string{".layout.bundlegen-draft", ".layout.bundlegen-new-5", ".layout.tmp-123"} {
				require.NoError(t, os.WriteFile(filepath.Join(parent, name), []byte("mine"), 0o644))
			}
			user := names(t, parent)

			// A new folder: one rename.
			var steps []string
			ctx := WithHook(context.Background(), func(_, step string) { steps = append(steps, step) })
			require.NoError(t, ReplaceDir(ctx, target, func(s string) error {
				return os.WriteFile(filepath.Join(s, "a"), []byte("1"), 0o644)
			}))
			require.Equal(t, []string{StepStage, StepRename, StepDone}, steps)

			// The whole tree is replaced: only what fill writes.
			steps = nil
			require.NoError(t, ReplaceDir(ctx, target, func(s string) error {
				return os.WriteFile(filepath.Join(s, "c"), []byte("3"), 0o644)
			}))
			require.Equal(t, []string{StepStage, StepRename, StepRemoveOld, StepDone}, steps)
			require.Equal(t, map[string]string{"c": "3"}, tree(t, target))
			require.ElementsMatch(t, append(user, "layout"), names(t, parent), "no staging folder is left, the user's files stay")

			// A failing fill leaves target as it was, and nothing beside it.
			err := ReplaceDir(context.Background(), target, func(s string) error {
				require.NoError(t, os.WriteFile(filepath.Join(s, "c"), []byte("changed"), 0o644))
				return errors.New("boom")
			})
			require.ErrorContains(t, err, "boom")
			require.Equal(t, map[string]string{"c": "3"}, tree(t, target))
			require.ElementsMatch(t, append(user, "layout"), names(t, parent))
		})
	}
}

// TestCleanRestoresOld: a run stopped between the two renames of the
// fallback leaves no target; the next write puts the old tree back first.
func TestCleanRestoresOld(t *testing.T) {
	parent := t.TempDir()
	old := filepath.Join(parent, ".bundle.bundlegen-old-1")
	require.NoError(t, os.MkdirAll(old, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(old, "a"), []byte("old"), 0o644))
	newer := filepath.Join(parent, ".bundle.bundlegen-new-2")
	require.NoError(t, os.MkdirAll(newer, 0o755))
	require.NoError(t, Clean(filepath.Join(parent, "bundle")))
	require.Equal(t, map[string]string{"a": "old"}, tree(t, filepath.Join(parent, "bundle")))
	require.Equal(t, []string{"bundle"}, names(t, parent))
}

// TestCheckOutput: the output paths tried, each refused naming the flag,
// the path and why.
func TestCheckOutput(t *testing.T) {
	repoRoot := t.TempDir()
	for _, d := range []string{"channels/releases", "bundle/p/1.0.0", "catalog", "sub/deeper"} {
		require.NoError(t, os.MkdirAll(filepath.Join(repoRoot, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(repoRoot, "go.mod"), []byte("module x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repoRoot, "channels", "images.lock"), nil, 0o644))
	require.NoError(t, os.Symlink(filepath.Join(repoRoot, "channels"), filepath.Join(repoRoot, "link")))
	require.NoError(t, os.MkdirAll(filepath.Join(repoRoot, "operator", "config"), 0o755))
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(repoRoot, "linkout")))
	require.NoError(t, unix.Mkfifo(filepath.Join(repoRoot, "pipe"), 0o644))
	t.Chdir(filepath.Join(repoRoot, "sub"))
	inputs := []string{"../channels", "../bundle/p/1.0.0", "../channels/images.lock"}
	tests := []struct {
		name      string
		out       string
		want      string
		assertion require.ErrorAssertionFunc
	}{
		{name: "a folder of its own", out: "../out/mine", assertion: require.NoError},
		{name: "catalog/, owned by no verb here", out: "../catalog", want: "refusing to write inside catalog/ of the repository", assertion: require.Error},
		{name: "inside catalog/", out: "../catalog/x", want: "refusing to write inside catalog/", assertion: require.Error},
		{name: "inside operator/config", out: "../operator/config/x", want: "refusing to write inside operator/config/", assertion: require.Error},
		{name: "inside bundle/, not an input", out: "../bundle/q", want: "refusing to write inside bundle/", assertion: require.Error},
		{name: "a folder holding operator/config", out: "../operator", want: "a folder that holds operator/config/", assertion: require.Error},
		{name: "a link out of the tree", out: "../linkout", want: "is a symbolic link", assertion: require.Error},
		{name: "through a link out of the tree", out: "../linkout/sub", want: "is a symbolic link", assertion: require.Error},
		{name: "a named pipe", out: "../pipe", want: "is a named pipe (FIFO), not a folder", assertion: require.Error},
		{name: "a file", out: "../go.mod", want: "is a regular file, not a folder", assertion: require.Error},
		{name: "out of the repository by ..", out: "../../escape", want: "refusing to write outside the repository", assertion: require.Error},
		{name: "a new folder", out: "../out/images", assertion: require.NoError},
		{name: "outside the repository", out: t.TempDir(), assertion: require.NoError},
		{name: "empty", out: "", want: "is empty", assertion: require.Error},
		{name: "dot", out: ".", want: "the working folder", assertion: require.Error},
		{name: "dot dot", out: "..", want: "the working folder", assertion: require.Error},
		{name: "ends in dot dot", out: "deeper/../..", want: "the working folder", assertion: require.Error},
		{name: "the working folder by path", out: filepath.Join(repoRoot, "sub"), want: "the working folder", assertion: require.Error},
		{name: "above the working folder", out: "/", want: "or a folder above it", assertion: require.Error},
		{name: "the repository root", out: repoRoot, want: "or a folder above it", assertion: require.Error},
		{name: "an input", out: "../channels", want: "the input ../channels", assertion: require.Error},
		{name: "inside an input", out: "../channels/releases", want: "the input ../channels", assertion: require.Error},
		{name: "an input through a symbolic link", out: "../link", want: "the input ../channels", assertion: require.Error},
		{name: "a folder holding an input", out: "../bundle", want: "the input ../bundle/p/1.0.0", assertion: require.Error},
		{name: "an input file", out: "../channels/images.lock", want: "the input ../channels", assertion: require.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutput("--output", tc.out, inputs...)
			tc.assertion(t, err)
			if err != nil {
				require.ErrorContains(t, err, "--output "+tc.out)
				require.ErrorContains(t, err, tc.want)
			}
		})
	}
}

// TestLockIsExclusive: while a write holds a folder's lock, no other
// process (another open file description) can take it.
func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lock(dir)
	require.NoError(t, err)
	f, err := os.Open(dir)
	require.NoError(t, err)
	defer f.Close()
	require.ErrorIs(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	unlock()
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
}

// TestOutputOwns: a verb that owns a protected folder may write exactly
// there, never inside it, nor into another protected folder.
func TestOutputOwns(t *testing.T) {
	repoRoot := t.TempDir()
	for _, d := range []string{"channels/releases", "bundle", "catalog/p"} {
		require.NoError(t, os.MkdirAll(filepath.Join(repoRoot, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(repoRoot, "go.mod"), []byte("module x\n"), 0o644))
	t.Chdir(repoRoot)
	require.NoError(t, Output{Path: "catalog", Default: true, Owns: []string{"catalog"}}.Check())
	require.NoError(t, Output{Path: "catalog", Owns: []string{"catalog"}}.Check())
	require.ErrorContains(t, Output{Path: "catalog/p", Owns: []string{"catalog"}}.Check(), "refusing to write inside catalog/")
	require.ErrorContains(t, Output{Path: "bundle", Owns: []string{"catalog"}}.Check(), "refusing to write inside bundle/")
}

// TestCheckName: names read from input files that would climb out of a
// folder, or into a hidden one, are refused, naming the file and the field.
func TestCheckName(t *testing.T) {
	for _, name := range []string{"", ".", "..", "../x", "a/b", `a\b`, ".hidden", "a\x00b"} {
		err := CheckName("package", "catalog/x/catalog.yaml", name)
		require.ErrorContains(t, err, "catalog/x/catalog.yaml: package")
		require.ErrorContains(t, err, "is not a plain name")
	}
	require.NoError(t, CheckName("package", "f", "inferencestack-crds"))
}

// TestCheckInput: a reader refuses, without blocking, a named pipe, a
// symbolic link, a folder holding either, and a tree under a journal.
func TestCheckInput(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bundle", "p", "1.0.0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bundle", "p", "1.0.0", "a.yaml"), nil, 0o644))
	require.NoError(t, CheckInput(filepath.Join(dir, "bundle", "p", "1.0.0")))
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	require.ErrorContains(t, CheckInput(filepath.Join(dir, "pipe")), "is a named pipe (FIFO)")
	require.NoError(t, os.Symlink(filepath.Join(dir, "bundle"), filepath.Join(dir, "link")))
	require.ErrorContains(t, CheckInput(filepath.Join(dir, "link")), "is a symbolic link")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bundle", JournalDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bundle", JournalDir, "journal"), []byte(journalMagic), 0o644))
	err := CheckInput(filepath.Join(dir, "bundle", "p", "1.0.0"))
	require.ErrorContains(t, err, "was being written by a bundlegen run that was stopped")
	require.ErrorContains(t, err, "run `bundlegen bundle` again")
}

// TestFileWhereAFolderIsExpected: the message names the file and says it
// is one, not "a regular file, not a regular file".
func TestFileWhereAFolderIsExpected(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), nil, 0o644))
	err := CheckPath(dir, filepath.Join(dir, "README.md", "graph.md"))
	require.ErrorContains(t, err, "README.md is a file where a folder is expected: move it away")
	require.NotContains(t, err.Error(), "not a regular file")
	_, err = FS(dir).Open("README.md/x")
	require.ErrorContains(t, err, "README.md is a file where a folder is expected")
}
