// Package bundle is the `bundlegen bundle` command.
package bundle

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/repopath"
)

// NewCmd returns `bundlegen bundle`.
func NewCmd() *cobra.Command {
	var (
		gen   bundle.Generate
		paths []string
	)
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Generate the registry+v1 bundles of every release under bundle/<package>/<version>",
		Long: `Check the inferencestack-crds and inferencestack-operator bundles of EVERY release in
channels/releases/ against their inputs, then generate and validate the missing ones and
write them, all in one step (bundle/ holds all of them or none).

A release whose input says published: true is frozen by that alone: no run writes or
regenerates its bundles. --publish VERSION records it: the hash of its input and of every
bundle file go to channels/published.sum (only when the bundles are exactly what its inputs
generate, and nothing else is written), and from then on any change to them, or to the image
lock's digests of its images, is refused, naming the file. A published release missing from
the sum is refused by every run (a publication not yet recorded, or removed lines). The bundles of an unpublished release must be
byte for byte what its inputs (release input, image lock, operator/config) generate now:
a difference is refused, naming the files, unless --regenerate rewrites them.
With --check nothing is written.

Exit status: 0 when every bundle is as it must be, 1 otherwise.`,
		Example: `  bundlegen bundle                      # write missing bundles, check all
  bundlegen bundle --check              # make verify
  bundlegen bundle --regenerate         # after changing operator/config, before publishing
  bundlegen bundle --publish 1.0.0      # after setting published: true in channels/releases/1.0.0.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := repopath.Resolve(cmd, paths...); err != nil {
				return err
			}
			gen.Warnings = cmd.ErrOrStderr()
			gen.DefaultOutput = !cmd.Flags().Changed("output")
			res, err := gen.Run(cmd.Context())
			for _, r := range res.Reports {
				r.Print(cmd.ErrOrStderr())
			}
			if err != nil {
				return err
			}
			for _, b := range res.Bundles {
				state := b.State
				if !b.Published {
					state += ", valid"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", b.Dir, state)
			}
			for _, v := range res.Frozen {
				fmt.Fprintf(cmd.OutOrStdout(), "release %s is published: recorded in %s, frozen from now on\n", v, gen.SumPath)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&gen.Version, "version", "", "write only this release's bundles (default: every release's missing ones); all are checked")
	paths = InputFlags(f, &gen, "output")
	f.BoolVar(&gen.AllowTags, "allow-tags", false, "allow images the lock does not list, by tag (warns; not for publishing)")
	f.BoolVar(&gen.Check, "check", false, "write nothing; fail unless bundle/ already holds exactly the bundles of every release")
	f.BoolVar(&gen.Regenerate, "regenerate", false, "rewrite the bundles of unpublished releases that differ from their inputs (never a published one)")
	f.StringVar(&gen.Publish, "publish", "", "record this release (its input says published: true) in the published sum; writes nothing else")
	return cmd
}

// InputFlags registers the flags of a release's inputs on f, into gen, with
// the bundle root under the name output, and returns the names of those path
// flags (their defaults are relative to the repository root).
func InputFlags(f *pflag.FlagSet, gen *bundle.Generate, output string) []string {
	f.StringVar(&gen.ReleasesDir, "releases", "channels/releases", "directory of the <version>.yaml release inputs")
	f.StringVar(&gen.LockPath, "lock", "channels/images.lock", "image digest lock")
	f.StringVar(&gen.SumPath, "published", "channels/published.sum", "hashes of the published (frozen) releases")
	f.StringVar(&gen.CRDDir, "crds", "operator/config/crd/bases", "directory of the generated CRDs")
	f.StringVar(&gen.RBACDir, "rbac", "operator/config/rbac", "directory of role.yaml and its bindings")
	f.StringVar(&gen.ManagerPath, "manager", "operator/config/manager/manager.yaml", "the manager Deployment")
	f.StringVar(&gen.SamplesDir, "samples", "operator/config/samples", "directory of InferenceStack samples (alm-examples)")
	f.StringVar(&gen.BasesDir, "bases", "operator/config/manifests/bases", "directory of the base CSVs <package>.clusterserviceversion.yaml")
	f.StringVar(&gen.OutputDir, output, "bundle", "root of the bundle tree")
	return []string{"releases", "lock", "published", "crds", "rbac", "manager", "samples", "bases", output}
}
