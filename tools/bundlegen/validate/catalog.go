package validate

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/validate"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/jsonout"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/repopath"
)

type catalogOptions struct {
	requireDigests bool
	output         string
}

// newCatalogCmd returns `validate catalog <dir>`.
func newCatalogCmd() *cobra.Command {
	o := catalogOptions{}
	cmd := &cobra.Command{
		Use:   "catalog [DIR]",
		Short: "Validate a file-based catalog (default catalog/)",
		Long: `Run operator-registry's model validation (one head per channel, no cycles, no
stranded bundles) and the checks it misses: a skipped bundle that sits in a replaces
chain (operator-registry#1762), a channel head that is not the highest version, a
newest bundle unreachable from the previous head, a default channel that does not
exist. Bundle and related images named by tag are warnings (stderr), findings with
--require-digests (the publish gate). Every upgrade edge (replaces, skips, skipRange)
of a package whose bundles ship CRDs is checked with sigs.k8s.io/crdify configured as
OLM v1's CRD upgrade safety preflight, which refuses a breaking CRD change on the
cluster at upgrade time; each breaking change is printed with the edge (from -> to),
the CRD, its version and the field.
Each finding names the package, channel and bundle.
Exit status: 0 when valid, 1 when there are findings or the catalog cannot be read
or holds no catalog objects.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if o.output != "text" && o.output != "json" {
				return fmt.Errorf("--output %q: use text or json", o.output)
			}
			dir := "catalog"
			if len(args) == 1 {
				dir = args[0]
			} else if dir, err = repopath.Path(cmd, dir, "DIR"); err != nil {
				return err
			}
			findings, err := validate.Catalog{Dir: dir, RequireDigests: o.requireDigests, Warnings: cmd.ErrOrStderr()}.Run(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if o.output == "json" {
				if findings == nil {
					findings = []validate.CatalogFinding{}
				}
				if err := jsonout.Write(out, findings); err != nil {
					return err
				}
			} else {
				for _, f := range findings {
					fmt.Fprintln(out, f)
				}
			}
			if len(findings) > 0 {
				return fmt.Errorf("catalog %s: %d finding(s)", dir, len(findings))
			}
			if o.output == "text" {
				fmt.Fprintf(out, "catalog %s is valid\n", dir)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.requireDigests, "require-digests", false, "the publish gate: report bundle and related images not referenced by digest")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return cmd
}
