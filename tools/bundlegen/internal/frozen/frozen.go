// Package frozen is the gate every push and signature of a release's bundle
// or catalog goes through: the same check as `bundlegen bundle --check`, so
// that nothing frozen (a published release) ships changed and no bundle
// ships that differs from what its release inputs generate.
package frozen

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/internal/repo"
)

// Check runs `bundlegen bundle --check` on the repository holding input
// when input is one of its bundles (a folder under bundle/) or its catalog
// (catalog/ or a folder inside it), and refuses, naming what differs, when
// any release's bundles are not as they must be. verb says what is refused
// ("push", "sign"). An input outside any repository's bundle/ and catalog/
// (an operator binary, a folder elsewhere) is not a release's: nil.
func Check(ctx context.Context, verb string, kind image.Kind, input string) error {
	if kind == image.KindOperator {
		return nil
	}
	abs, err := filepath.Abs(input)
	if err != nil {
		return err
	}
	root, err := repo.Root(abs)
	if err != nil {
		return nil //nolint:nilerr // not in a repository: no release to compare with
	}
	if st, err := os.Stat(filepath.Join(root, "channels", "releases")); err != nil || !st.IsDir() {
		return nil // a repository without release inputs: no release to compare with
	}
	var inRelease bool
	for _, d := range []string{"bundle", "catalog"} {
		if atomicfs.Within(abs, filepath.Join(root, d)) {
			inRelease = true
		}
	}
	if !inRelease {
		return nil
	}
	join := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	gen := bundle.Generate{
		ReleasesDir: join("channels/releases"),
		LockPath:    join("channels/images.lock"),
		SumPath:     join("channels/published.sum"),
		CRDDir:      join("operator/config/crd/bases"),
		RBACDir:     join("operator/config/rbac"),
		ManagerPath: join("operator/config/manager/manager.yaml"),
		SamplesDir:  join("operator/config/samples"),
		BasesDir:    join("operator/config/manifests/bases"),
		OutputDir:   join("bundle"),
		Check:       true,
		Warnings:    io.Discard,
	}
	if _, err := gen.Run(ctx); err != nil {
		return fmt.Errorf("refusing to %s %s: the release's bundles are not what `bundlegen bundle --check` accepts, "+
			"so what would ship is not what was released or what its inputs generate: %w", verb, input, err)
	}
	return nil
}
