// Package pin is the `bundlegen pin` command.
package pin

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/repopath"
)

// NewCmd returns `bundlegen pin`.
func NewCmd() *cobra.Command {
	var (
		req      release.PinRequest
		insecure bool
		bundles  string
	)
	cmd := &cobra.Command{
		Use:   "pin",
		Short: "Print a release's operand pin (versions.yaml); --resolve refreshes the image lock from the registries",
		Long: `Print the operand version pin of a release, the versions.yaml the operator bundle ships in its
ConfigMap: the operator version and each distribution's image by digest. Digests come from the
image lock; an image the lock records as unresolved keeps its tag (with a warning). Without
--resolve this works offline. With --resolve every tag of the release is looked up in its
registry and the lock is rewritten with the digests found. A published release (published: true)
prints the pin its bundle ships (bundle/inferencestack-operator/<version>), which never changes;
--resolve refuses it, and refuses to move the digest of an image a published release uses.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := repopath.Resolve(cmd, "releases", "lock", "bundles"); err != nil {
				return err
			}
			req.Shipped = func(version string) (release.Pin, error) {
				s, err := bundle.ReadShipped(bundles, version)
				return s.Pin, err
			}
			req.Warnings = cmd.ErrOrStderr()
			req.Resolver = func(ctx context.Context, ref string) (string, error) {
				return image.Resolve(ctx, ref, image.ResolveOptions{Insecure: insecure})
			}
			p, err := req.Run(cmd.Context())
			if err != nil {
				return err
			}
			data, err := p.Marshal()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Version, "version", "", "release (default: the highest in --releases)")
	f.StringVar(&req.ReleasesDir, "releases", "channels/releases", "directory of the <version>.yaml release inputs")
	f.StringVar(&req.LockPath, "lock", "channels/images.lock", "image digest lock")
	f.BoolVar(&req.Resolve, "resolve", false, "look the digests up in the registries and rewrite the lock")
	f.BoolVar(&insecure, "insecure", false, "with --resolve, allow plain HTTP registries")
	f.BoolVar(&req.AllowTags, "allow-tags", false, "allow images the lock does not list, by tag (warns)")
	f.StringVar(&bundles, "bundles", "bundle", "root of the bundle tree (a published release's pin is read from its bundle)")
	return cmd
}
