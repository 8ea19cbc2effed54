// Package repopath makes bundlegen's default paths (channels/, bundle/,
// catalog/, operator/config/...) relative to the repository root rather than
// the working folder, so every verb works from any subfolder of the
// repository, and says so when it runs outside one.
package repopath

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/repo"
)

// Resolve sets each named flag that the user left at its relative default
// to that default under the repository root. Flags the user set keep their
// value, relative to the working folder, as usual.
func Resolve(cmd *cobra.Command, flags ...string) error {
	for _, name := range flags {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			return fmt.Errorf("internal error: %s has no flag --%s", cmd.CommandPath(), name)
		}
		if f.Changed || f.DefValue == "" || filepath.IsAbs(f.DefValue) {
			continue
		}
		p, err := Path(cmd, f.DefValue, "--"+name)
		if err != nil {
			return err
		}
		if err := f.Value.Set(p); err != nil {
			return err
		}
	}
	return nil
}

// Path returns p, a path relative to the repository root, as a path from the
// working folder; what names the flag or argument for the error when no
// repository holds the working folder.
func Path(cmd *cobra.Command, p, what string) (string, error) {
	root, err := repo.Root("")
	if err != nil {
		return "", fmt.Errorf("%s: %w: run it inside the Inference Stack repository, or give %s", cmd.CommandPath(), err, what)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	full := filepath.Join(root, p)
	if rel, err := filepath.Rel(wd, full); err == nil {
		return rel, nil
	}
	return full, nil
}
