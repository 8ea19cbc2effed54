package fbc

import (
	"context"

	"github.com/inferencestack/inferencestack/internal/olmgraph"
	"github.com/inferencestack/inferencestack/internal/validate"
)

// Package is the upgrade graph of one package that Load returns. (An alias,
// so that callers of Load need not import olmgraph to name it.)
type Package = olmgraph.Package

// Load reads a catalog directory (e.g. catalog/) with operator-registry's
// loader and returns the upgrade graph of every package in it
// (olmgraph.Graphs); a bundle whose version cannot be read is an error.
func Load(ctx context.Context, dir string) ([]olmgraph.Package, error) {
	cfg, err := validate.LoadCatalog(ctx, dir)
	if err != nil {
		return nil, err
	}
	pkgs, err := olmgraph.Graphs(*cfg)
	if err != nil {
		return nil, err
	}
	return pkgs, nil
}
