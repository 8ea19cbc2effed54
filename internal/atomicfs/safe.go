package atomicfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The release tools read and write only regular files and folders: a
// symbolic link could lead out of the tree (and a write through it would
// change a file elsewhere), and opening a named pipe blocks until a writer
// comes. ReadFile, FS and CheckTree refuse both, naming the path, and never
// open anything in a way that can block.

// ReadFile reads the regular file path. A symbolic link, a named pipe, a
// socket or a device is refused without blocking.
func ReadFile(path string) ([]byte, error) {
	return ReadFileLimit(path, math.MaxInt64-1)
}

// ReadFileLimit is ReadFile for a file that cannot be larger than limit
// bytes (a key, a small document): a larger one is refused, naming it,
// without reading it whole.
func ReadFileLimit(path string, limit int64) ([]byte, error) {
	f, err := openSafe(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, refusal(path, st.Mode())
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d this file can be: name the right file", path, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew past %d bytes while it was read: name the right file", path, limit)
	}
	return b, nil
}

// CheckInput is the guard every reader of a file or folder goes through
// before it reads it (or hands it to a library that opens its files): it
// refuses path while a bundlegen write under way, or stopped, has its
// journal in path or in a folder above it (so no verb reads a half-written
// tree, or packs staged and backup files), when path is a symbolic link,
// and when it is, or holds, a named pipe, socket or device, never opening
// one.
func CheckInput(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for d := abs; ; d = filepath.Dir(d) {
		verb := ""
		switch filepath.Base(d) {
		case "bundle":
			verb = "bundle"
		case "catalog":
			verb = "catalog"
		}
		if err := Pending(d, verb); err != nil {
			return err
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	st, err := os.Lstat(path)
	if err != nil {
		return describe(err)
	}
	if st.IsDir() {
		return CheckTree(path)
	}
	if !st.Mode().IsRegular() {
		return refusal(path, st.Mode())
	}
	return nil
}

// openSafe opens path for reading without following a final symbolic link
// and without blocking (a named pipe opens at once, and is then refused by
// its caller's mode check).
func openSafe(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err == nil {
		return f, nil
	}
	if st, lerr := os.Lstat(path); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
		return nil, refusal(path, st.Mode())
	}
	return nil, describe(err)
}

// FS is a read-only fs.FS over the folder dir, as os.DirFS, except that it
// refuses symbolic links (dir itself included) and special files, naming
// them, and never blocks on opening one. Loaders of other projects
// (operator-registry's declcfg) read catalogs through it.
func FS(dir string) fs.FS { return safeFS{dir: dir} }

type safeFS struct{ dir string }

// path checks name's folders below dir (each must be a folder, not a link)
// and returns the full path.
func (s safeFS) path(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	full := s.dir
	parts := []string{}
	if name != "." {
		parts = strings.Split(name, "/")
	}
	check := func(p string) error {
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return refusal(p, st.Mode())
		}
		return nil
	}
	if err := check(full); err != nil {
		return "", err
	}
	for i, part := range parts {
		full = filepath.Join(full, part)
		if i < len(parts)-1 {
			if err := check(full); err != nil {
				return "", err
			}
		}
	}
	return full, nil
}

func (s safeFS) Open(name string) (fs.File, error) {
	full, err := s.path("open", name)
	if err != nil {
		return nil, err
	}
	f, err := openSafe(full)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		f.Close()
		return nil, refusal(full, st.Mode())
	}
	return f, nil
}

func (s safeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	full, err := s.path("readdir", name)
	if err != nil {
		return nil, err
	}
	if name != "." {
		st, err := os.Lstat(full)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			return nil, refusal(full, st.Mode())
		}
	}
	entries, err := os.ReadDir(full)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		// A write under way or stopped (its journal) at any level: never
		// read half of it.
		if e.Name() == JournalDir {
			if err := Pending(full, ""); err != nil {
				return nil, err
			}
		}
	}
	return entries, nil
}

func (s safeFS) ReadFile(name string) ([]byte, error) {
	full, err := s.path("read", name)
	if err != nil {
		return nil, err
	}
	return ReadFile(full)
}

// CheckTree walks the folder dir and refuses, naming the first one, a
// symbolic link (dir itself included) or a special file (named pipe,
// socket, device) in it. Callers run it before handing dir to a library
// that would open its files itself.
func CheckTree(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return describe(err)
	}
	if !st.IsDir() {
		return refusal(dir, st.Mode())
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return describe(err)
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return refusal(p, d.Type())
		}
		return nil
	})
}

// CheckPath refuses p when it, or a folder between root and p, is a
// symbolic link or not a folder (p itself may be a file). A p outside root
// is checked alone. Missing parts are not an error.
func CheckPath(root, p string) error {
	stop := filepath.Clean(root)
	if !Within(p, stop) {
		stop = filepath.Dir(filepath.Clean(p))
	}
	for d := filepath.Clean(p); d != stop && d != filepath.Dir(d); d = filepath.Dir(d) {
		st, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			continue // missing, or under a file: the file is named further up
		case err != nil:
			return describe(err)
		case st.Mode()&fs.ModeSymlink != 0 || d != filepath.Clean(p) && !st.IsDir():
			return refusal(d, st.Mode())
		}
	}
	return nil
}

// refusal is the error for a path that is not a regular file or folder.
func refusal(p string, m fs.FileMode) error {
	if m&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(p)
		return fmt.Errorf("%s is a symbolic link (to %s): bundlegen never follows links in its inputs and outputs, which could lead out of the tree; "+
			"replace it with the file or folder itself", p, target)
	}
	if m.IsDir() {
		return fmt.Errorf("%s is a folder where a file is expected: move it away", p)
	}
	if m.IsRegular() {
		return fmt.Errorf("%s is a file where a folder is expected: move it away, or name the folder it should be", p)
	}
	return fmt.Errorf("%s is a %s, not a regular file: bundlegen reads and writes only regular files and folders, and never opens one that could block; remove it", p, kind(m))
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "folder"
	case m.IsRegular():
		return "regular file"
	}
	return "special file"
}

// describe adds the likely cause to a permission error: the message of
// EPERM alone ("operation not permitted") does not say that the file or
// folder is immutable or read-only. Errors keep their paths (os.PathError).
func describe(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w: the file, or the folder that holds it, is read-only or immutable; check with `ls -ld` and `lsattr -d` (`chattr -i` clears the immutable flag)", err)
	}
	return err
}
