// Package verify is the `bundlegen verify` command: it checks an image's
// signature, its signed SBOM and provenance, and the provenance's commit.
package verify

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/jsonout"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/repopath"
)

type options struct {
	key      string
	commit   string
	release  string
	releases string
	format   string
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
    image and whose source commit is the release's: the sourceCommit of the
    release input named by --release (channels/releases/X.Y.Z.yaml), or --commit;
  - both again as cosign attestations (the tag sha256-<hex>.att): an in-toto
    statement about this image signed by the key in a DSSE envelope, of
    predicate type https://spdx.dev/Document (the SBOM) and
    https://slsa.dev/provenance/v1 (the provenance, naming the same commit).

Referrers are read through the OCI referrers API or, on registries without
it, the referrers tag schema. Exit status 0 when all hold; 1 otherwise, with
one line per missing or wrong item. The same signatures verify with
'cosign verify --key KEY --insecure-ignore-tlog=true IMAGE', the attestations with
'cosign verify-attestation --key KEY --insecure-ignore-tlog=true --type
spdxjson|slsaprovenance1 IMAGE' (docs/release.md).`,
		Example: "  bundlegen verify quay.io/acme/inferencestack-operator-bundle:v1.2.0 --key cosign.pub --release 1.2.0\n" +
			"  bundlegen verify quay.io/acme/inferencestack-catalog@sha256:... --key cosign.pub --commit $(git rev-parse v1.2.0^{commit})",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.format != "text" && o.format != "json" {
				return fmt.Errorf("-o %q: want text or json", o.format)
			}
			commit, err := o.expectedCommit(cmd)
			if err != nil {
				return err
			}
			v, err := image.KeyVerifierFrom(o.key)
			if err != nil {
				return err
			}
			res, err := image.Verify{Image: args[0], Verifier: v, Commit: commit}.Run(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if o.format == "json" {
				return jsonout.Write(out, res)
			}
			fmt.Fprintf(out, "verified: %s\nsbom: %s\nprovenance: %s\ncommit: %s\nattestations: %s\n", res.Image, res.SBOM, res.Provenance, res.Commit, strings.Join(res.Attestations, ", "))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.key, "key", "", "the release's public key (PEM, cosign.pub)")
	f.StringVar(&o.commit, "commit", "", "the git commit the provenance must name (default with --release: the release input's sourceCommit)")
	f.StringVar(&o.release, "release", "", "the release version X.Y.Z whose input (channels/releases/X.Y.Z.yaml) names the commit (sourceCommit)")
	f.StringVar(&o.releases, "releases", "channels/releases", "directory of the release inputs")
	f.StringVarP(&o.format, "format", "o", "text", "result format: text or json")
	return cmd
}

// expectedCommit is the commit the provenance must name: --commit, or the
// sourceCommit of the release input --release names (both must agree).
func (o *options) expectedCommit(cmd *cobra.Command) (string, error) {
	if o.release == "" {
		if o.commit == "" {
			return "", fmt.Errorf("give the release's commit: --release X.Y.Z (its input's sourceCommit) or --commit")
		}
		return o.commit, nil
	}
	if err := repopath.Resolve(cmd, "releases"); err != nil {
		return "", err
	}
	in, err := release.LoadInput(filepath.Join(o.releases, o.release+".yaml"))
	if err != nil {
		return "", err
	}
	switch {
	case in.SourceCommit == "" && o.commit == "":
		return "", fmt.Errorf("release input %s names no sourceCommit: set it to the commit the release's images were built from (docs/release.md), or give --commit", in.Path)
	case in.SourceCommit == "":
		return o.commit, nil
	case o.commit != "" && !strings.EqualFold(o.commit, in.SourceCommit):
		return "", fmt.Errorf("--commit %s differs from the sourceCommit %s of %s: give one of them", o.commit, in.SourceCommit, in.Path)
	}
	return in.SourceCommit, nil
}
