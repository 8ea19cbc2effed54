// Package root assembles the bundlegen command tree.
package root

import (
	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/tools/bundlegen/image"
)

// NewCmd returns the bundlegen root command with every verb.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "bundlegen",
		Short:         "Make the OLM bundles, catalog and images of Inference Stack",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	cmd.AddCommand(image.NewCmd())
	return cmd
}
