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
in version order, replaces/skips/skipRange edges, deprecated bundles and channels marked.
All files are written in one step, or none; a file in their place that bundlegen graph
did not write is never overwritten. --output may not be the working folder, the
repository root, channels/, bundle/ or operator/config/ (or a folder inside or above one).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := repopath.Resolve(cmd, "catalog"); err != nil {
				return err
			}
			if cmd.Flags().Changed("output") && o.output == "" {
				return fmt.Errorf("--output is empty: name the folder to write, or leave the flag out to write into the catalog folder")
			}
			// The repository's own folders are inputs -o may not write into,
			// as for the other verbs.
			var protected []string
			for _, p := range []string{"channels", "bundle", "operator/config"} {
				if dir, err := repopath.Path(cmd, p, "--output"); err == nil {
					protected = append(protected, dir)
				}
			}
			paths, err := graph.Graph{CatalogDir: o.catalog, OutDir: o.output, Packages: o.packages, Protected: protected}.Run(cmd.Context())
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
