// Package atomicfs is the one write path of the release tools (tools/).
//
// A verb writes all its files in one transaction (Tx): every target is
// checked first (no symbolic link, no special file), each new content is
// staged beside its target under a name that embeds the run's random id,
// the set is recorded in a journal (<root>/.bundlegen/journal, with a magic
// header), and the staged files are renamed over their targets one by one.
// Only the targets change: every other file of those folders stays as it is,
// including files a user saves while the run goes. A failure puts the targets
// back; a killed run is finished (past the commit point) or undone by the
// next Begin or Recover on the same root, which removes exactly the entries
// the journal lists. Verbs that only read a tree refuse it while a journal is
// pending (Pending).
//
// ReadFile, FS and CheckTree read inputs without following links or opening
// special files; CheckOutput refuses output paths that would make a verb
// overwrite what it did not write. ReplaceDir, which swaps a whole folder, is
// kept for outputs a verb owns entirely (an OCI layout it marked).
package atomicfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// infix marks every temporary entry this package makes.
const infix = ".bundlegen-"

// LeftoverPattern is the glob (as in .gitignore) of the staged and backup
// files, and ReplaceDir's folders, a killed run may leave behind (beside
// JournalDir). It is for .gitignore only: nothing is ever removed because its
// name matches; a recovery removes what the journal lists.
const LeftoverPattern = ".*" + infix + "*"

// Steps a Hook is called with.
const (
	// StepStage comes before the new content is written to its temporary place.
	StepStage = "stage"
	// StepRename comes before the rename (or exchange) that makes it visible.
	StepRename = "rename"
	// StepRemoveOld comes before the replaced content is removed.
	StepRemoveOld = "remove-old"
	// StepDone comes after the write is complete.
	StepDone = "done"
)

// Hook is called, in the writing goroutine, with each step of a write before
// that step runs, and with StepDone after the last. Fault-injection tests use
// it to kill the writer between any two steps.
type Hook func(path, step string)

type hookKey struct{}

// WithHook returns a context whose writes call h.
func WithHook(ctx context.Context, h Hook) context.Context {
	return context.WithValue(ctx, hookKey{}, h)
}

func step(ctx context.Context, path, name string) {
	if h, ok := ctx.Value(hookKey{}).(Hook); ok && h != nil {
		h(path, name)
	}
}

func tempPrefix(base, kind string) string { return "." + base + infix + kind + "-" }

// WriteFile replaces path with data (mode 0644), creating the parent
// folders: a transaction (Tx) of one file rooted at its folder.
func WriteFile(ctx context.Context, path string, data []byte) error {
	path = filepath.Clean(path)
	tx, err := Begin(ctx, filepath.Dir(path))
	if err != nil {
		return err
	}
	defer tx.Close()
	tx.Write(path, data)
	return tx.Commit()
}

// ReplaceDir replaces the folder target, one a verb owns entirely (an OCI
// layout it marked), with a tree that fill writes into an empty staging
// folder beside it. The tree becomes visible in one step: an exchange of the
// two folders (renameat2 RENAME_EXCHANGE), or a rename when target does not
// exist yet. Where the file system cannot exchange, target is renamed aside
// first, and a run killed between the two renames is rolled back by the next
// write. When fill fails, target is untouched. Trees that hold other files
// (bundle/, catalog/) are written with Tx instead.
func ReplaceDir(ctx context.Context, target string, fill func(staging string) error) error {
	target = filepath.Clean(target)
	parent, base := filepath.Dir(target), filepath.Base(target)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	unlock, err := lock(parent)
	if err != nil {
		return err
	}
	defer unlock()
	if err := clean(parent, base); err != nil {
		return err
	}
	st, err := os.Lstat(target)
	exists := err == nil
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case exists && !st.IsDir():
		return fmt.Errorf("%s is not a folder", target)
	}

	step(ctx, target, StepStage)
	staging, err := os.MkdirTemp(parent, tempPrefix(base, "new"))
	if err != nil {
		return err
	}
	visible := false
	defer func() {
		if !visible {
			os.RemoveAll(staging)
		}
	}()
	if err := os.Chmod(staging, 0o755); err != nil {
		return err
	}
	if err := fill(staging); err != nil {
		return err
	}
	if err := syncTree(staging); err != nil {
		return err
	}

	step(ctx, target, StepRename)
	if !exists {
		if err := os.Rename(staging, target); err != nil {
			return err
		}
		visible = true
		if err := syncDir(parent); err != nil {
			return err
		}
		step(ctx, target, StepDone)
		return nil
	}
	old := staging // after an exchange the staging name holds the old tree
	switch err := exchange(staging, target); {
	case errors.Is(err, errExchangeUnsupported):
		if old, err = swapByRenames(parent, base, staging, target); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	visible = true
	if err := syncDir(parent); err != nil {
		return err
	}
	step(ctx, target, StepRemoveOld)
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("removing the replaced %s (now %s): %w", target, old, err)
	}
	step(ctx, target, StepDone)
	return nil
}

// Clean removes the leftovers a stopped run left beside path (a file or a
// folder that WriteFile or ReplaceDir writes), restoring path first if the
// run stopped between the two renames of the fallback. Writes clean up
// anyway; a run that has nothing to write calls Clean.
func Clean(path string) error {
	path = filepath.Clean(path)
	parent := filepath.Dir(path)
	if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	unlock, err := lock(parent)
	if err != nil {
		return err
	}
	defer unlock()
	return clean(parent, filepath.Base(path))
}

// swapByRenames moves target aside (.<base>.bundlegen-old-*) and staging into
// its place; it returns where the old tree went.
func swapByRenames(parent, base, staging, target string) (string, error) {
	// A fresh unique name (the caller holds the parent's lock): os.Rename
	// does not replace a folder.
	old, err := os.MkdirTemp(parent, tempPrefix(base, "old"))
	if err != nil {
		return "", err
	}
	if err := os.Remove(old); err != nil {
		return "", err
	}
	if err := os.Rename(target, old); err != nil {
		return "", err
	}
	if err := os.Rename(staging, target); err != nil {
		if rerr := os.Rename(old, target); rerr != nil {
			return "", fmt.Errorf("%w; and putting %s back from %s: %w", err, target, old, rerr)
		}
		return "", err
	}
	return old, nil
}

// ownEntry matches the folders ReplaceDir makes beside its target
// (os.MkdirTemp's random digits): .<base>.bundlegen-new-<n> (staging) and
// .<base>.bundlegen-old-<n> (the replaced tree).
var ownEntry = regexp.MustCompile(`^\.(.+)\.bundlegen-(new|old)-[0-9]+$`)

// clean removes the folders an earlier ReplaceDir of parent/base left,
// and no other entry (a user's file named like one stays). When a run was
// killed between the two renames of swapByRenames, target is missing and its
// old tree is put back first.
func clean(parent, base string) error {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	own := func(e fs.DirEntry, kind string) bool {
		m := ownEntry.FindStringSubmatch(e.Name())
		return e.IsDir() && m != nil && m[1] == base && (kind == "" || m[2] == kind)
	}
	target := filepath.Join(parent, base)
	_, err = os.Lstat(target)
	missing := errors.Is(err, fs.ErrNotExist)
	for _, e := range entries {
		if missing && own(e, "old") {
			if err := os.Rename(filepath.Join(parent, e.Name()), target); err != nil {
				return fmt.Errorf("restoring %s from %s, left by a run that was stopped: %w", target, e.Name(), describe(err))
			}
			missing = false
		}
	}
	for _, e := range entries {
		if own(e, "") {
			if _, err := os.Lstat(filepath.Join(parent, e.Name())); errors.Is(err, fs.ErrNotExist) {
				continue // restored above
			}
			if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
				return fmt.Errorf("removing %s, left by a run that was stopped: %w", filepath.Join(parent, e.Name()), describe(err))
			}
		}
	}
	return nil
}

// syncTree flushes every file and folder of dir to disk, so that the rename
// that publishes it never exposes empty files after a crash.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return syncPath(p)
	})
}

func syncDir(dir string) error { return syncPath(dir) }

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
