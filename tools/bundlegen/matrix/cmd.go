// Package matrix is the `bundlegen matrix` command: it checks and prints
// the compatibility matrix of the operator and CRD package releases.
package matrix

import (
	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/repopath"
)

type options struct {
	catalog, releases string
}

// NewCmd returns the matrix command.
func NewCmd() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Check and print which operator releases work with which CRD package releases",
		Long: `Read the InferenceStack API versions of every release input (api: reads, served,
storage) and the channel heads and CRD package upgrade edges of the catalog, and print
the compatibility matrix as a Markdown table (make release writes it to
docs/compatibility.md). Exit status 1, naming the releases, the fields and the way out,
when a channel head of the operator reads a version that a channel head of the CRD
package does not serve and no CRD package upgrade edge leads on from that head to a
release serving it (the operator would be stranded: a "no" cell with no upgrade out),
or when a CRD package upgrade edge leads to a release that no longer serves the version
its source stores. bundlegen catalog runs the same check before it writes.
See docs/api-versions.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := repopath.Resolve(cmd, "catalog", "releases"); err != nil {
				return err
			}
			m, err := bundle.Matrix(cmd.Context(), o.catalog, o.releases)
			if err != nil {
				return err
			}
			if err := m.Check(); err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(m.Markdown())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.catalog, "catalog", "catalog", "catalog directory (written by bundlegen catalog)")
	f.StringVar(&o.releases, "releases", "channels/releases", "directory of the release inputs")
	return cmd
}
