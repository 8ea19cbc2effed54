// Package repopath makes bundlegen's default paths (channels/, bundle/,
// catalog/, operator/config/...) relative to the repository root rather than
// the working folder, so every verb works from any subfolder of the
// repository, and says so when it runs outside one.
package repopath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/repo"
)

// Resolve sets each named flag that the user left at its relative default
// to that default under the repository root. Flags the user set keep their
// value, relative to the working folder, as usual. The repository is the one
// holding the working folder or, run from outside any (cd /tmp), the one
// holding a path the user gave with one of these flags.
func Resolve(cmd *cobra.Command, flags ...string) error {
	var given []string
	for _, name := range flags {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			return fmt.Errorf("internal error: %s has no flag --%s", cmd.CommandPath(), name)
		}
		if f.Changed && f.Value.String() != "" {
			given = append(given, f.Value.String())
		}
	}
	root := ""
	for _, name := range flags {
		f := cmd.Flags().Lookup(name)
		if f.Changed || f.DefValue == "" || filepath.IsAbs(f.DefValue) {
			continue
		}
		if root == "" {
			var err error
			if root, err = findRoot(given); err != nil {
				return fmt.Errorf("%s: %w: run it inside the Inference Stack repository, or give --%s", cmd.CommandPath(), err, name)
			}
		}
		p, err := fromWorkingFolder(root, f.DefValue)
		if err != nil {
			return err
		}
		if err := f.Value.Set(p); err != nil {
			return err
		}
	}
	return nil
}

// findRoot is the repository holding the working folder, else the first
// one holding a given path.
func findRoot(given []string) (string, error) {
	root, err := repo.Root("")
	if err == nil {
		return root, nil
	}
	for _, p := range given {
		if r, gerr := repo.Root(p); gerr == nil {
			return r, nil
		}
	}
	return "", err
}

// Path returns p, a path relative to the repository root, as a path from the
// working folder; what names the flag or argument for the error when no
// repository holds the working folder.
func Path(cmd *cobra.Command, p, what string) (string, error) {
	root, err := repo.Root("")
	if err != nil {
		return "", fmt.Errorf("%s: %w: run it inside the Inference Stack repository, or give %s", cmd.CommandPath(), err, what)
	}
	return fromWorkingFolder(root, p)
}

func fromWorkingFolder(root, p string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	full := filepath.Join(root, p)
	// Relative inside the repository, absolute from outside it.
	if rel, err := filepath.Rel(root, wd); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return full, nil
	}
	if rel, err := filepath.Rel(wd, full); err == nil {
		return rel, nil
	}
	return full, nil
}
