package fbc

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"

	"github.com/operator-framework/operator-registry/alpha/declcfg"

	"github.com/inferencestack/inferencestack/tools/internal/atomicfs"
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
	return path, atomicfs.WriteFile(context.Background(), path, data)
}
