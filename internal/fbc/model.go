package fbc

import (
	"context"
	"fmt"

	"github.com/operator-framework/operator-registry/alpha/declcfg"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/olmgraph"
)

// Package is the upgrade graph of one package that Load returns. (An alias,
// so that callers of Load need not import olmgraph to name it.)
type Package = olmgraph.Package

// Load reads a catalog directory (e.g. catalog/) with operator-registry's
// loader and returns the upgrade graph of every package in it
// (olmgraph.Graphs); a bundle whose version cannot be read is an error.
func Load(ctx context.Context, dir string) ([]olmgraph.Package, error) {
	if err := atomicfs.Pending(dir, "catalog"); err != nil {
		return nil, err
	}
	// Never a link out of the folder, never an open that blocks (a named pipe).
	cfg, err := declcfg.LoadFS(ctx, atomicfs.FS(dir))
	if err != nil {
		return nil, fmt.Errorf("load catalog %s: %w", dir, err)
	}
	pkgs, err := olmgraph.Graphs(*cfg)
	if err != nil {
		return nil, err
	}
	return pkgs, nil
}
