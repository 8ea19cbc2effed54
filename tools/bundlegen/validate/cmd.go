// Package validate is the `bundlegen validate` command group.
package validate

import (
	"github.com/spf13/cobra"
)

// NewCmd returns the validate parent command; each artifact kind is a subcommand.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Validate release artifacts",
	}
	cmd.AddCommand(newCatalogCmd())
	return cmd
}
