// Package verify is the `bundlegen verify` command: it checks an image's
// signature, its signed SBOM and provenance, and the provenance's commit.
package verify

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/image"
)

type options struct {
	key    string
	commit string
	format string
}

// NewCmd returns the verify command.
func NewCmd() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "verify IMAGE",
		Short: "Check an image's signature, its signed SBOM and provenance, and the provenance's commit",
		Long: `Check an image signed by bundlegen sign, with the release's public key:

  - a signature of the image's manifest by the key (cosign's key-based
    format: the tag sha256-<hex>.sig);
  - an SPDX SBOM attached as a referrer (application/spdx+json), signed by the
    key, describing this image;
  - an in-toto SLSA provenance statement attached as a referrer
    (application/vnd.in-toto+json), signed by the key, whose subject is this
    image and whose source commit is --commit.

Referrers are read through the OCI referrers API or, on registries without
it, the referrers tag schema. Exit status 0 when all hold; 1 otherwise, with
one line per missing or wrong item. The same signatures verify with
'cosign verify --key KEY --insecure-ignore-tlog=true IMAGE' (docs/release.md).`,
		Example: "  bundlegen verify quay.io/acme/inferencestack-operator-bundle:v1.2.0 --key cosign.pub --commit $(git rev-parse v1.2.0^{commit})",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.format != "text" && o.format != "json" {
				return fmt.Errorf("-o %q: want text or json", o.format)
			}
			if o.commit == "" {
				return fmt.Errorf("--commit is required: the git commit the release was built from")
			}
			v, err := image.KeyVerifierFrom(o.key)
			if err != nil {
				return err
			}
			res, err := image.Verify{Image: args[0], Verifier: v, Commit: o.commit}.Run(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if o.format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprintf(out, "verified: %s\nsbom: %s\nprovenance: %s\ncommit: %s\n", res.Image, res.SBOM, res.Provenance, res.Commit)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.key, "key", "", "the release's public key (PEM, cosign.pub)")
	f.StringVar(&o.commit, "commit", "", "the git commit the provenance must name (the release's)")
	f.StringVarP(&o.format, "format", "o", "text", "result format: text or json")
	return cmd
}
