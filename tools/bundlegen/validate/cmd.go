// Package validate is the `bundlegen validate` command and its subcommands.
package validate

import "github.com/spf13/cobra"

// NewCmd returns `bundlegen validate`.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Validate release artifacts",
	}
	cmd.AddCommand(newBundleCmd())
	cmd.AddCommand(newCatalogCmd())
	return cmd
}
