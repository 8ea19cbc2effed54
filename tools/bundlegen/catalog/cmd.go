// Package catalog is the `bundlegen catalog` command: it renders
// catalog/<package>/catalog.yaml from channels/<package>.semver.yaml.
package catalog

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/tools/internal/fbc"
)

type options struct {
	channels, root, output string
	packages               []string
}

// NewCmd returns the catalog command.
func NewCmd() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Render the file-based catalog from channels/ and bundle/",
		Long: `Render catalog/<package>/catalog.yaml for each channels/<package>.semver.yaml with
operator-registry's semver template over the bundle directories it lists (no registry,
no container engine), then apply channels/<package>.release.yaml: image reference
template, default channel, deprecations and opt-in cross-major bridges.
Output is sorted and written atomically. See docs/catalog.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			paths, err := fbc.Catalogs{ChannelsDir: o.channels, Root: o.root, OutDir: o.output, Packages: o.packages}.Run(cmd.Context())
			for _, p := range paths {
				fmt.Fprintln(cmd.OutOrStdout(), "wrote", p)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&o.channels, "channels", "channels", "directory of <package>.semver.yaml templates")
	cmd.Flags().StringVar(&o.root, "root", ".", "directory the bundle references in the templates are relative to")
	cmd.Flags().StringVarP(&o.output, "output", "o", "catalog", "catalog output directory")
	cmd.Flags().StringSliceVar(&o.packages, "package", nil, "render only these packages (default all)")
	return cmd
}
