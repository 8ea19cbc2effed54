package atomicfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inferencestack/inferencestack/internal/repo"
)

// Output is where a verb writes, and the one guard every writing verb of
// bundlegen goes through (bundle, catalog, graph, image, documents) before
// it reads or writes anything.
type Output struct {
	// Flag names the option for messages (e.g. "--output").
	Flag string
	// Path is the folder the verb writes into.
	Path string
	// Default says Path is the verb's default, not typed by the user.
	Default bool
	// Owns are the repository folders (of repo.Protected) the verb writes
	// into itself: bundle/ for `bundle`, catalog/ for `catalog` and
	// `graph`. Path may be one of them, never a folder inside one.
	Owns []string
	// Inputs are the files and folders the verb reads.
	Inputs []string
}

// Check refuses an output path that a verb must never replace or write
// into, naming the flag, the path, why, and what to do:
//   - the file system root, the working folder or a folder above it, the
//     repository root or a folder above it;
//   - an input, a folder inside one or a folder that holds one;
//   - a folder of repo.Protected (bundle/, catalog/, channels/,
//     operator/config/) the verb does not own, a folder inside one or one
//     that holds one: those hold the release's inputs and its generated,
//     frozen artifacts, which only their own verb writes;
//   - a path through a symbolic link (the output itself or a folder between
//     the repository root and it), or an existing output that is not a
//     folder (a file, a named pipe: never opened);
//   - a relative path that climbs out of the repository holding the working
//     folder with `..` (an output outside the repository is named by an
//     absolute path, on purpose).
//
// Paths are compared after resolving symbolic links.
func (o Output) Check() error {
	flag, out, typed, inputs := o.Flag, o.Path, !o.Default, o.Inputs
	if flag == "" {
		flag = "--output"
	}
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
	return o.checkRepository(flag, out, real)
}

// checkRepository applies the rules of Check that depend on the repository:
// its protected folders, links and `..` escapes.
func (o Output) checkRepository(flag, out, real string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	// The repository: the one holding an input, else the working folder's,
	// else the output's.
	var root string
	for _, start := range append(slices.Clone(o.Inputs), "", filepath.Dir(abs)) {
		if start != "" {
			if _, err := os.Lstat(start); err != nil {
				continue
			}
		}
		if r, err := repo.Root(start); err == nil {
			root = r
			break
		}
	}
	wdRoot, _ := repo.Root("")
	if wdRoot != "" && !filepath.IsAbs(out) && !within(abs, wdRoot) {
		return fmt.Errorf("%s %s: refusing to write outside the repository %s: the path climbs out of it with `..`; "+
			"name a folder inside the repository (or, on purpose, an absolute path)", flag, out, wdRoot)
	}
	// No link on the way: from the repository root down to the output (the
	// output itself included), or the output alone when it is elsewhere.
	if root != "" && within(abs, root) {
		if err := CheckPath(root, abs); err != nil {
			return fmt.Errorf("%s %s: %w", flag, out, err)
		}
	} else if err := CheckPath(filepath.Dir(abs), abs); err != nil {
		return fmt.Errorf("%s %s: %w", flag, out, err)
	}
	if st, err := os.Lstat(abs); err == nil && !st.IsDir() {
		return fmt.Errorf("%s %s: %s is a %s, not a folder: name a folder for the output", flag, out, out, kind(st.Mode()))
	}
	if root == "" {
		return nil
	}
	realRoot, err := realPath(root)
	if err != nil {
		return err
	}
	for _, p := range repo.Protected {
		dir := filepath.Join(realRoot, filepath.FromSlash(p))
		owned := slices.Contains(o.Owns, p)
		switch {
		case owned && real == dir:
			continue
		case within(real, dir):
			return fmt.Errorf("%s %s: refusing to write inside %s/ of the repository (%s): %s; "+
				"name a folder outside %s", flag, out, p, dir, repo.ProtectedWhy(p), strings.Join(repo.Protected, "/, ")+"/")
		case within(dir, real):
			return fmt.Errorf("%s %s: refusing to write to a folder that holds %s/ of the repository (%s): %s; name a folder of its own",
				flag, out, p, dir, repo.ProtectedWhy(p))
		}
	}
	return nil
}

// CheckOutput refuses an output path that a verb must never replace or write
// into (Output.Check, for a typed path that owns no repository folder).
// flag names the option for messages (e.g. "--output").
func CheckOutput(flag, out string, inputs ...string) error {
	return Output{Flag: flag, Path: out, Inputs: inputs}.Check()
}

// CheckName refuses a name read from an input file (a package, a file)
// that is not a single plain path element, before any path is built from
// it: empty, `.`, `..`, or holding a slash, a backslash or a NUL would
// lead a write out of its folder. what and where say which field of which
// file holds it.
func CheckName(what, where, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("%s: %s %q is not a plain name (no `/`, `\\`, leading `.` or `..`), and bundlegen builds paths from it: "+
			"rename it to a DNS-1123 name such as my-operator", where, what, name)
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
