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
	"strings"
)

// infix marks every temporary entry this package makes.
const infix = ".bundlegen-"

// LeftoverPattern is the glob (as in .gitignore) of the temporary entries a
// killed run may leave behind.
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

// legacyLeftover matches the temporary entries of earlier bundlegen
// versions: .<file>.tmp-<n> beside a file, .bundlegen-<n> in bundle/.
var legacyLeftover = regexp.MustCompile(`^(\..+\.tmp-[0-9]+|\.bundlegen-[0-9]+)$`)

// IsLeftover reports whether a file name is one of the temporary entries this
// package (or an earlier bundlegen) makes.
func IsLeftover(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, infix) || legacyLeftover.MatchString(name)
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

// ReplaceDir replaces the folder target with a tree that fill writes into an
// empty staging folder beside it. With keep, the staging folder first holds a
// copy of target's current content (leftovers excluded), so fill only adds or
// replaces entries. The tree becomes visible in one step: an exchange of the
// two folders (renameat2 RENAME_EXCHANGE), or a rename when target does not
// exist yet. Where the file system cannot exchange, target is renamed aside
// first, and a run killed between the two renames is rolled back by the next
// write. When fill fails, target is untouched.
func ReplaceDir(ctx context.Context, target string, keep bool, fill func(staging string) error) error {
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
	if keep && exists {
		if err := copyTree(target, staging); err != nil {
			return err
		}
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

// clean removes the leftovers of earlier runs beside parent/base. When a run
// was killed between the two renames of swapByRenames, target is missing and
// its old tree is put back first.
func clean(parent, base string) error {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	target := filepath.Join(parent, base)
	_, err = os.Lstat(target)
	missing := errors.Is(err, fs.ErrNotExist)
	for _, e := range entries {
		if missing && strings.HasPrefix(e.Name(), tempPrefix(base, "old")) {
			if err := os.Rename(filepath.Join(parent, e.Name()), target); err != nil {
				return fmt.Errorf("restoring %s from %s, left by a run that was stopped: %w", target, e.Name(), err)
			}
			missing = false
		}
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "."+base+infix) || strings.HasPrefix(name, "."+base+".tmp-") && legacyLeftover.MatchString(name) {
			if err := os.RemoveAll(filepath.Join(parent, name)); err != nil {
				return fmt.Errorf("removing %s, left by a run that was stopped: %w", filepath.Join(parent, name), err)
			}
		}
	}
	return nil
}

// copyTree copies the folders, regular files and symbolic links of src into
// dst, skipping leftovers.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		if IsLeftover(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		out := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(out, info.Mode().Perm())
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, data, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, out)
		default:
			return fmt.Errorf("%s: cannot copy a %s; remove it", p, d.Type())
		}
	})
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
