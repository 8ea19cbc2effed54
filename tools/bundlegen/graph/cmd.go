// Package graph is the `bundlegen graph` command: it draws each package's
// upgrade graph as catalog/<package>/graph.md (Mermaid) and graph.svg.
package graph

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/graph"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/repopath"
)

type options struct {
	catalog, output string
	packages        []string
}

// NewCmd returns the graph command.
func NewCmd() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "graph",
		Short: "Draw the upgrade graph of each catalog package (Mermaid + SVG)",
		Long: `Write <output>/<package>/graph.md (a Mermaid flowchart) and graph.svg (a
self-contained SVG) for each package of the catalog: one lane per channel, bundles
in version order, replaces/skips/skipRange edges, deprecated bundles and channels marked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := repopath.Resolve(cmd, "catalog"); err != nil {
				return err
			}
			paths, err := graph.Graph{CatalogDir: o.catalog, OutDir: o.output, Packages: o.packages}.Run(cmd.Context())
			for _, p := range paths {
				fmt.Fprintln(cmd.OutOrStdout(), "wrote", p)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&o.catalog, "catalog", "catalog", "catalog directory to read")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output directory (default: the catalog directory)")
	cmd.Flags().StringSliceVar(&o.packages, "package", nil, "draw only these packages (default all)")
	return cmd
}
