package bundle

import (
	"context"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/release"
)

// Matrix is the compatibility matrix of the release inputs in releasesDir
// with the channel heads and CRD upgrade edges of the catalog in
// catalogDir.
func Matrix(ctx context.Context, catalogDir, releasesDir string) (release.Matrix, error) {
	heads, err := fbc.Heads(ctx, catalogDir)
	if err != nil {
		return release.Matrix{}, err
	}
	pkgs, err := fbc.Load(ctx, catalogDir)
	if err != nil {
		return release.Matrix{}, err
	}
	var edges [][2]string
	for _, p := range pkgs {
		if p.Name != PackageCRDs {
			continue
		}
		for _, e := range p.Edges() {
			from, _ := p.Bundle(e.From)
			to, _ := p.Bundle(e.To)
			edges = append(edges, [2]string{from.Version.String(), to.Version.String()})
		}
	}
	return release.LoadMatrix(releasesDir, heads[PackageOperator], heads[PackageCRDs], edges)
}
