package atomicfs_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/atomicfs/atomicfstest"
)

// userFiles are files a user keeps in the trees a verb writes, some named
// like the leftovers of earlier bundlegen versions: every write leaves them
// byte for byte as they were.
var userFiles = map[string]string{
	"bundle/.review.tmp-2026":        "review\n",
	"bundle/.notes.bundlegen-draft":  "draft\n",
	"bundle/p/.notes.bundlegen-tmp":  "notes\n",
	"bundle/.bundle.bundlegen-new-1": "mine\n",
	"channels/notes.txt":             "notes\n",
}

var oldFiles = map[string]string{
	"bundle/p/1.0.0/a.yaml":  "a old\n",
	"bundle/q/c.yaml":        "c old\n",
	"channels/published.sum": "sum old\n",
}

var newFiles = map[string]string{
	"bundle/p/1.0.0/a.yaml":            "a new\n",
	"bundle/p/2.0.0/manifests/b.yaml":  "b new\n",
	"bundle/q/c.yaml":                  "c new\n",
	"channels/published.sum":           "sum new\n",
	"bundle/p/2.0.0/metadata/ann.yaml": "ann new\n",
}

// fixture writes the old tree and the user files under dir.
func fixture(t *testing.T, dir string) {
	t.Helper()
	for _, m := range []map[string]string{oldFiles, userFiles} {
		for p, data := range m {
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644))
		}
	}
}

func want(files map[string]string) map[string]string {
	out := maps.Clone(userFiles)
	maps.Copy(out, files)
	return out
}

// commit writes newFiles under dir in one transaction rooted at dir/bundle.
func commit(ctx context.Context, dir string) error {
	tx, err := atomicfs.Begin(ctx, filepath.Join(dir, "bundle"))
	if err != nil {
		return err
	}
	defer tx.Close()
	for p, data := range newFiles {
		tx.Write(filepath.Join(dir, p), []byte(data))
	}
	return tx.Commit()
}

func TestTxCommit(t *testing.T) {
	dir := t.TempDir()
	fixture(t, dir)
	require.NoError(t, commit(context.Background(), dir))
	require.Equal(t, want(newFiles), atomicfstest.Tree(t, dir), "only the targets changed, and nothing is left beside them")
	_, err := os.Lstat(filepath.Join(dir, "bundle", atomicfs.JournalDir))
	require.ErrorIs(t, err, os.ErrNotExist, "the journal folder goes when the write is done")
}

// TestTxRefuses: links and special files among the targets, and the
// reserved journal names taken by a user's file, are refused before
// anything is written, naming the path; every file stays byte for byte.
func TestTxRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir, outside string)
		want  []string
	}{
		{name: "a target that is a link to a file outside the tree", setup: func(t *testing.T, dir, outside string) {
			p := filepath.Join(dir, "bundle/q/c.yaml")
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(filepath.Join(outside, "file"), p))
		}, want: []string{"bundle/q/c.yaml is a symbolic link (to " + "", "never follows links"}},
		{name: "a package folder that is a link", setup: func(t *testing.T, dir, outside string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "bundle/q")))
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "bundle/q")))
		}, want: []string{"bundle/q is a symbolic link", "replace it with the file or folder itself"}},
		{name: "a target that is a named pipe", setup: func(t *testing.T, dir, _ string) {
			p := filepath.Join(dir, "bundle/q/c.yaml")
			require.NoError(t, os.Remove(p))
			require.NoError(t, syscall.Mkfifo(p, 0o644))
		}, want: []string{"bundle/q/c.yaml is a named pipe (FIFO)", "remove it"}},
		{name: "the sum is a link", setup: func(t *testing.T, dir, outside string) {
			p := filepath.Join(dir, "channels/published.sum")
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(filepath.Join(outside, "file"), p))
		}, want: []string{"channels/published.sum is a symbolic link"}},
		{name: "the root is a link", setup: func(t *testing.T, dir, outside string) {
			require.NoError(t, os.Rename(filepath.Join(dir, "bundle"), filepath.Join(outside, "bundle")))
			require.NoError(t, os.Symlink(filepath.Join(outside, "bundle"), filepath.Join(dir, "bundle")))
		}, want: []string{"bundle is a symbolic link", "replace the link with a folder"}},
		{name: "a user's file named like the journal folder", setup: func(t *testing.T, dir, _ string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "bundle", atomicfs.JournalDir), []byte("mine\n"), 0o644))
		}, want: []string{"bundle/.bundlegen is a regular file, not bundlegen's journal folder: move it away"}},
		{name: "a user's file named like the journal", setup: func(t *testing.T, dir, _ string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "bundle", atomicfs.JournalDir), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "bundle", atomicfs.JournalDir, "journal"), []byte("{}\n"), 0o644))
		}, want: []string{"bundle/.bundlegen/journal is not a bundlegen journal", "move the file away"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			fixture(t, dir)
			require.NoError(t, os.WriteFile(filepath.Join(outside, "file"), []byte("outside\n"), 0o644))
			tc.setup(t, dir, outside)
			before, beforeOutside := atomicfstest.Tree(t, dir), atomicfstest.Tree(t, outside)
			err := commit(context.Background(), dir)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.Equal(t, before, atomicfstest.Tree(t, dir))
			require.Equal(t, beforeOutside, atomicfstest.Tree(t, outside))
		})
	}
}

// TestTxFailureUndoes: a write that fails half way (a rename refused after
// others were done, an immutable target) leaves every target as it was and
// nothing beside them; the next write succeeds without a word about a
// stopped run.
func TestTxFailureUndoes(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) context.Context
		want  []string
	}{
		{name: "a rename fails after two were done", setup: func(t *testing.T, dir string) context.Context {
			renames := 0
			return atomicfs.WithHook(context.Background(), func(p, step string) {
				if step != atomicfs.StepRename {
					return
				}
				if renames++; renames == 3 {
					// Take the staged file away: the rename fails.
					matches, err := filepath.Glob(filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".bundlegen-*"))
					require.NoError(t, err)
					require.Len(t, matches, 1)
					require.NoError(t, os.Remove(matches[0]))
				}
			})
		}, want: []string{"replacing ", "no such file or directory"}},
		{name: "an immutable target", setup: func(t *testing.T, dir string) context.Context {
			chattr(t, "+i", filepath.Join(dir, "bundle/q/c.yaml"))
			return context.Background()
		}, want: []string{"replacing " + "", "bundle/q/c.yaml", "operation not permitted", "read-only or immutable", "lsattr"}},
		{name: "an immutable folder", setup: func(t *testing.T, dir string) context.Context {
			chattr(t, "+i", filepath.Join(dir, "bundle/p"))
			return context.Background()
		}, want: []string{"bundle/p/2.0.0", "operation not permitted", "read-only or immutable"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fixture(t, dir)
			ctx := tc.setup(t, dir)
			err := commit(ctx, dir)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.NotContains(t, err.Error(), "undoing")
			require.Equal(t, want(oldFiles), atomicfstest.Tree(t, dir))
			require.NoError(t, atomicfs.Pending(filepath.Join(dir, "bundle"), "bundle"), "no journal is left")
			chattr(t, "-i", filepath.Join(dir, "bundle/q/c.yaml"))
			chattr(t, "-i", filepath.Join(dir, "bundle/p"))
			require.NoError(t, commit(context.Background(), dir))
			require.Equal(t, want(newFiles), atomicfstest.Tree(t, dir))
		})
	}
}

// TestTxCancelled: a run whose context is cancelled (the first SIGINT or
// SIGTERM) before the commit point stops and undoes what it wrote; after it,
// the write finishes.
func TestTxCancelled(t *testing.T) {
	tests := []struct {
		name   string
		at     string
		want   map[string]string
		assert require.ErrorAssertionFunc
	}{
		{name: "while staging", at: atomicfs.StepStage, want: want(oldFiles), assert: require.Error},
		{name: "at the commit point", at: atomicfs.StepCommit, want: want(oldFiles), assert: require.Error},
		{name: "while renaming", at: atomicfs.StepRename, want: want(newFiles), assert: require.NoError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fixture(t, dir)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx = atomicfs.WithHook(ctx, func(_, step string) {
				if step == tc.at {
					cancel()
				}
			})
			err := commit(ctx, dir)
			tc.assert(t, err)
			if err != nil {
				require.ErrorIs(t, err, context.Canceled)
			}
			require.Equal(t, tc.want, atomicfstest.Tree(t, dir))
		})
	}
}

// TestRecoverFirstJournal: a run killed while it wrote its first journal
// leaves only the journal's temporary file: readers refuse the tree, the
// next writer removes it, and the journal folder with it.
func TestRecoverFirstJournal(t *testing.T) {
	dir := t.TempDir()
	fixture(t, dir)
	root := filepath.Join(dir, "bundle")
	require.NoError(t, os.MkdirAll(filepath.Join(root, atomicfs.JournalDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, atomicfs.JournalDir, "journal.0123456789abcdef.prepare"),
		[]byte("bundlegen transaction journal v1\n{\"state\":"), 0o644))
	require.ErrorContains(t, atomicfs.Pending(root, "bundle"), "bundle/.bundlegen is there")
	require.NoError(t, atomicfs.Recover(root))
	require.NoError(t, atomicfs.Pending(root, "bundle"))
	require.Equal(t, want(oldFiles), atomicfstest.Tree(t, dir))
	_, err := os.Lstat(filepath.Join(root, atomicfs.JournalDir))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func chattr(t *testing.T, flag, path string) {
	t.Helper()
	out, err := exec.Command("chattr", flag, path).CombinedOutput()
	require.NoError(t, err, "chattr %s %s (the test needs root and a file system with attributes): %s", flag, path, out)
	if flag == "+i" {
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
	}
}

const killDirEnv = "ATOMICFS_TEST_KILL_DIR"

// TestTxKillHelper is the writer TestKilledTx kills.
func TestTxKillHelper(t *testing.T) {
	ctx, ok := atomicfstest.Child()
	if !ok {
		t.Skip("run by TestKilledTx")
	}
	require.NoError(t, commit(ctx, os.Getenv(killDirEnv)))
}

// TestKilledTx kills a write (SIGKILL) before each of its steps. Until the
// next run, a tree that is neither old nor new has its journal, so readers
// refuse it (Pending); the recovery makes it the old tree when the kill came
// before the commit point and the new one after; the user's files survive
// every kill, and nothing else is left.
func TestKilledTx(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]bool{}
	atomicfstest.EveryStep(t, "TestTxKillHelper", []string{killDirEnv + "=" + dir},
		func(int) {
			require.NoError(t, os.RemoveAll(dir))
			fixture(t, dir)
		},
		func(n int, killed bool, log string) {
			last := atomicfstest.LastLine(log)
			t.Logf("step %d: killed %v: %s", n, killed, last)
			root := filepath.Join(dir, "bundle")
			got := atomicfstest.Tree(t, dir)
			pending := atomicfs.Pending(root, "bundle")
			if !maps.Equal(got, want(oldFiles)) && !maps.Equal(got, want(newFiles)) {
				require.Error(t, pending, "step %d: a tree that is neither old nor new must have its journal", n)
				require.ErrorContains(t, pending, "was being written by a bundlegen run that was stopped")
				require.ErrorContains(t, pending, "run `bundlegen bundle` again")
			}
			require.NoError(t, atomicfs.Recover(root))
			require.NoError(t, atomicfs.Pending(root, "bundle"))
			got = atomicfstest.Tree(t, dir)
			committed := !killed || strings.Contains(last, " rename of ") || strings.Contains(last, " remove-old of ") ||
				strings.Contains(last, " done of ")
			switch {
			case maps.Equal(got, want(oldFiles)):
				require.False(t, committed, "step %d: killed after the commit point, the write must be finished", n)
				seen["old"] = true
			case maps.Equal(got, want(newFiles)):
				require.True(t, committed, "step %d: killed before the commit point, the write must be undone", n)
				seen["new"] = true
			default:
				t.Fatalf("step %d (%s): after recovery the tree is neither old nor new:\n%v", n, last, got)
			}
			// Nothing but the tree: no folder the run made stays empty.
			if !committed {
				_, err := os.Lstat(filepath.Join(dir, "bundle/p/2.0.0"))
				require.True(t, errors.Is(err, os.ErrNotExist), "step %d left bundle/p/2.0.0", n)
			}
		})
	require.Equal(t, map[string]bool{"old": true, "new": true}, seen)
}
