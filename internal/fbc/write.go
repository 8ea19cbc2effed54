package fbc

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"

	"github.com/operator-framework/operator-registry/alpha/declcfg"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// CatalogFile is the file name of a package's catalog under catalog/<package>/.
const CatalogFile = "catalog.yaml"

// Marshal writes a catalog as sorted YAML documents, exactly as opm does
// (declcfg.WriteYAML).
func Marshal(cfg declcfg.DeclarativeConfig) ([]byte, error) {
	var buf bytes.Buffer
	if err := declcfg.WriteYAML(cfg, &buf); err != nil {
		return nil, fmt.Errorf("write catalog YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// MarshalCatalog is a single-package catalog's catalog.yaml: exactly the
// bytes opm writes (Marshal), with nothing added, so that the file equals
// opm's render of the same template. Its provenance is in catalog/README.md.
func MarshalCatalog(cfg declcfg.DeclarativeConfig) ([]byte, error) {
	if len(cfg.Packages) != 1 {
		return nil, fmt.Errorf("want exactly one olm.package to write, found %d", len(cfg.Packages))
	}
	return Marshal(cfg)
}

// WriteCatalog writes cfg, a single-package catalog, to
// <outDir>/<package>/catalog.yaml (MarshalCatalog) atomically and returns
// the path.
func WriteCatalog(cfg declcfg.DeclarativeConfig, outDir string) (string, error) {
	data, err := MarshalCatalog(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(outDir, cfg.Packages[0].Name, CatalogFile)
	tx, err := atomicfs.Begin(context.Background(), outDir)
	if err != nil {
		return "", err
	}
	defer tx.Close()
	tx.Write(path, data)
	return path, tx.Commit()
}
