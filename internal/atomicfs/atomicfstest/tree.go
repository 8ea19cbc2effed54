package atomicfstest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Tree reads every file under dir: slash-separated path relative to dir ->
// content (for a link, "symlink -> <target>"; for a special file, its mode). A test compares trees to tell the old release from the new one.
func Tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			// Links and special files are described, never opened (a
			// named pipe would block).
			target, err := os.Readlink(p)
			out[filepath.ToSlash(rel)] = "symlink -> " + target
			return err
		case !d.Type().IsRegular():
			out[filepath.ToSlash(rel)] = "special " + d.Type().String()
			return nil
		}
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return out
}

// TreeIfExists is Tree, or nil when dir does not exist.
func TreeIfExists(t testing.TB, dir string) map[string]string {
	t.Helper()
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return Tree(t, dir)
}
