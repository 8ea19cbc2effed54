package validate

import (
	"context"
	"fmt"

	"github.com/operator-framework/operator-registry/alpha/declcfg"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// LoadCatalog reads the file-based catalog in dir with operator-registry's
// loader, as opm and catalogd do, but through atomicfs.FS: a symbolic link
// or a special file is refused, naming it, and nothing is opened in a way
// that can block. A folder that a bundlegen run is writing, or was stopped
// while writing, is refused (atomicfs.Pending). A file that does not parse
// is named in the error (operator-registry's own message does not say which).
func LoadCatalog(ctx context.Context, dir string) (*declcfg.DeclarativeConfig, error) {
	if err := atomicfs.Pending(dir, "catalog"); err != nil {
		return nil, err
	}
	fsys := atomicfs.FS(dir)
	cfg, err := declcfg.LoadFS(ctx, fsys)
	if err == nil {
		return cfg, nil
	}
	// Find the file: the walk hands each parse error its path.
	werr := declcfg.WalkMetasFS(ctx, fsys, func(path string, _ *declcfg.Meta, err error) error {
		if err != nil {
			return fmt.Errorf("%s/%s: %w", dir, path, err)
		}
		return nil
	})
	if werr != nil {
		return nil, fmt.Errorf("load catalog %s: %w", dir, werr)
	}
	return nil, fmt.Errorf("load catalog %s: %w", dir, err)
}
