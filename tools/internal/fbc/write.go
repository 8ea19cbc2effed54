package fbc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
)

// CatalogFile is the file name of a package's catalog under catalog/<package>/.
const CatalogFile = "catalog.yaml"

// Marshal writes a catalog as sorted YAML documents, the way opm does.
func Marshal(cfg declcfg.DeclarativeConfig) ([]byte, error) {
	var buf bytes.Buffer
	if err := declcfg.WriteYAML(cfg, &buf); err != nil {
		return nil, fmt.Errorf("write catalog YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteCatalog writes cfg, a single-package catalog, to
// <outDir>/<package>/catalog.yaml atomically and returns the path.
func WriteCatalog(cfg declcfg.DeclarativeConfig, outDir string) (string, error) {
	if len(cfg.Packages) != 1 {
		return "", fmt.Errorf("want exactly one olm.package to write, found %d", len(cfg.Packages))
	}
	data, err := Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(outDir, cfg.Packages[0].Name, CatalogFile)
	return path, WriteFileAtomic(path, data)
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so readers see the old or the new file, never a
// partial one. It creates the parent directories.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
