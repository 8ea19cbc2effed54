// Package bundle is the `bundlegen bundle` command.
package bundle

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/tools/internal/bundle"
)

// NewCmd returns `bundlegen bundle`.
func NewCmd() *cobra.Command {
	var gen bundle.Generate
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Generate the registry+v1 bundles of a release under bundle/<package>/<version>",
		Long: `Generate the inferencestack-crds and inferencestack-operator bundles of one release from
channels/releases/<version>.yaml, the image lock, the operator's manifests and the base CSVs,
validate them, and write them atomically. A bundle that already exists must come out byte for
byte identical: released bundles are never rewritten. With --check nothing is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gen.Warnings = cmd.ErrOrStderr()
			res, err := gen.Run(cmd.Context())
			if err != nil {
				return err
			}
			for _, r := range res.Reports {
				r.Print(cmd.ErrOrStderr())
			}
			for _, pkg := range []string{bundle.PackageCRDs, bundle.PackageOperator} {
				state := "unchanged"
				switch {
				case gen.Check:
					state = "up to date"
				case slices.Contains(res.Written, pkg):
					state = "written"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s, valid\n", res.Bundles[pkg], state)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&gen.Version, "version", "", "release to generate (default: the highest in --releases)")
	f.StringVar(&gen.ReleasesDir, "releases", "channels/releases", "directory of the <version>.yaml release inputs")
	f.StringVar(&gen.LockPath, "lock", "channels/images.lock", "image digest lock")
	f.StringVar(&gen.CRDDir, "crds", "operator/config/crd/bases", "directory of the generated CRDs")
	f.StringVar(&gen.RBACDir, "rbac", "operator/config/rbac", "directory of role.yaml and its bindings")
	f.StringVar(&gen.ManagerPath, "manager", "operator/config/manager/manager.yaml", "the manager Deployment")
	f.StringVar(&gen.SamplesDir, "samples", "operator/config/samples", "directory of InferenceStack samples (alm-examples)")
	f.StringVar(&gen.BasesDir, "bases", "operator/config/manifests/bases", "directory of the base CSVs <package>.clusterserviceversion.yaml")
	f.StringVar(&gen.OutputDir, "output", "bundle", "root of the bundle tree")
	f.BoolVar(&gen.AllowTags, "allow-tags", false, "allow images without a digest in the lock (warns; not for publishing)")
	f.BoolVar(&gen.Check, "check", false, "write nothing; fail unless bundle/ already holds exactly these bundles")
	return cmd
}
