// Package root assembles the bundlegen command from one package per verb.
package root

import (
	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/tools/bundlegen/bundle"
	"github.com/inferencestack/inferencestack/tools/bundlegen/catalog"
	"github.com/inferencestack/inferencestack/tools/bundlegen/graph"
	"github.com/inferencestack/inferencestack/tools/bundlegen/image"
	"github.com/inferencestack/inferencestack/tools/bundlegen/pin"
	"github.com/inferencestack/inferencestack/tools/bundlegen/rbac"
	"github.com/inferencestack/inferencestack/tools/bundlegen/upgrades"
	"github.com/inferencestack/inferencestack/tools/bundlegen/validate"
)

// NewCmd returns the bundlegen root command.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "bundlegen",
		Short:         "Cut Inference Stack operator releases: OLM bundles, catalog, images",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.AddCommand(bundle.NewCmd())
	cmd.AddCommand(pin.NewCmd())
	cmd.AddCommand(validate.NewCmd())
	cmd.AddCommand(catalog.NewCmd())
	cmd.AddCommand(graph.NewCmd())
	cmd.AddCommand(upgrades.NewCmd())
	cmd.AddCommand(image.NewCmd())
	cmd.AddCommand(rbac.NewCmd())
	return cmd
}
