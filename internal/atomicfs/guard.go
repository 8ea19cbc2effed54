package atomicfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/inferencestack/inferencestack/internal/repo"
)

// CheckOutput refuses an output path that a verb must never replace or write
// into: the file system root, the working folder or a folder above it, the
// repository root or a folder above it, and each of inputs, a folder inside
// one or a folder that holds one. flag names the option for messages (e.g.
// "--output"). Paths are compared after resolving symbolic links.
func CheckOutput(flag, out string, inputs ...string) error {
	return CheckOutputOf(flag, out, true, inputs...)
}

// CheckOutputOf is CheckOutput; typed says the user gave out. A default
// output (the repository's bundle/ or catalog/, found from a subfolder) is
// not refused for holding the working folder: per-file writes never move a
// folder, and only a typed `.` or `..` is a likely typo.
func CheckOutputOf(flag, out string, typed bool, inputs ...string) error {
	if out == "" {
		return fmt.Errorf("%s is empty: name the folder to write", flag)
	}
	if typed && (filepath.Clean(out) == "." || filepath.Clean(out) == ".." || strings.HasSuffix(filepath.Clean(out), string(filepath.Separator)+"..")) {
		return fmt.Errorf("%s %s: refusing to write to the working folder or a folder above it; name a folder of its own", flag, out)
	}
	real, err := realPath(out)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, out, err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	holds := func(what, dir string) error {
		d, err := realPath(dir)
		if err != nil {
			return err
		}
		if within(d, real) {
			return fmt.Errorf("%s %s: refusing to write to %s (%s) or a folder above it; name a folder of its own", flag, out, what, dir)
		}
		return nil
	}
	if typed {
		if err := holds("the working folder", wd); err != nil {
			return err
		}
	}
	for _, start := range []string{wd, filepath.Dir(real)} {
		if root, err := repo.Root(start); err == nil {
			if err := holds("the repository root", root); err != nil {
				return err
			}
		}
	}
	if repo.IsRoot(real) {
		return fmt.Errorf("%s %s: refusing to write to a repository root; name a folder of its own", flag, out)
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		r, err := realPath(in)
		if err != nil {
			return err
		}
		if within(r, real) || within(real, r) {
			return fmt.Errorf("%s %s: refusing to write to the input %s, a folder inside it or a folder that holds it; name a folder of its own", flag, out, in)
		}
	}
	return nil
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// realPath is the absolute path of p with symbolic links resolved as far as
// the path exists.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		r, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(dir) == dir {
			return "", err
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}
