// Package root assembles the bundlegen command tree.
package root

import (
	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/tools/bundlegen/catalog"
	"github.com/inferencestack/inferencestack/tools/bundlegen/graph"
	"github.com/inferencestack/inferencestack/tools/bundlegen/upgrades"
	"github.com/inferencestack/inferencestack/tools/bundlegen/validate"
)

// NewCmd returns the bundlegen root command.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "bundlegen",
		Short:         "Build Inference Stack's OLM bundles, catalog, upgrade graph and images",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.AddCommand(catalog.NewCmd())
	cmd.AddCommand(graph.NewCmd())
	cmd.AddCommand(upgrades.NewCmd())
	cmd.AddCommand(validate.NewCmd())
	return cmd
}
