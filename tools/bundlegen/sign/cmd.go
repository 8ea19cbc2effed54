// Package sign is the `bundlegen sign` command: it attaches the SBOM and
// provenance of a pushed image and signs the image and both documents.
package sign

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/frozen"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/gitsource"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/jsonout"
)

type options struct {
	key    string
	source gitsource.Flags
	labels []string
	format string
}

// NewCmd returns the `sign` command with its `bundle`, `catalog` and
// `operator` subcommands.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sign",
		Short: "Attach the SBOM and provenance of a pushed image, sign the three and attest the image with both (cosign's key-based formats)",
		Long: `Sign an image pushed by bundlegen image, with the release key.

The image is rebuilt from its input and must be the one at IMAGE (sign refuses
another digest). Then bundlegen attaches to it, as OCI 1.1 referrers (with the
referrers tag schema, sha256-<hex>, on registries without the referrers API):

  - an SPDX 2.3 JSON SBOM (application/spdx+json): the operator's Go modules and
    the base layer; a bundle's manifests and related images; a catalog's files
    and the bundles it references;
  - an in-toto SLSA provenance v1 statement (application/vnd.in-toto+json): the
    source repository and commit, the build command, the inputs by digest.

Both are byte-reproducible: their time is the commit's, never the clock's. It
signs the image and both documents as cosign does with a key (the tag
sha256-<hex>.sig), so 'cosign verify --key' checks them, and attests the image
with both as cosign does (DSSE envelopes of in-toto statements under the tag
sha256-<hex>.att), so 'cosign verify-attestation --key --type spdxjson' and
'--type slsaprovenance1' find them. The key is an
unencrypted ECDSA P-256 PEM private key, from --key or $` + image.SigningKeyEnv + `.
The commit and its time default to HEAD of the repository's git checkout. With
or without --commit, the input must be exactly that commit's content: sign
refuses a bundle or catalog folder holding an edited, untracked or ignored
file, and an operator binary unless the checkout is clean at that commit. See
docs/release.md.`,
	}
	cmd.AddCommand(
		newKindCmd(image.KindBundle, "bundle DIR IMAGE", "Sign a bundle image built from DIR",
			"  bundlegen sign bundle bundle/inferencestack-operator/1.2.0 quay.io/acme/inferencestack-operator-bundle:v1.2.0 --key release.key"),
		newKindCmd(image.KindCatalog, "catalog DIR IMAGE", "Sign a catalog image built from DIR",
			"  bundlegen sign catalog catalog quay.io/acme/inferencestack-catalog:v1.2.0 --key release.key"),
		newKindCmd(image.KindOperator, "operator BINARY IMAGE", "Sign an operator image built from the manager BINARY",
			"  bundlegen sign operator bin/images/manager quay.io/acme/inferencestack-operator:v1.2.0 --key release.key \\\n"+
				"    --label org.opencontainers.image.revision=$(git rev-parse HEAD)"),
	)
	return cmd
}

func newKindCmd(kind image.Kind, use, short, example string) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			input, ref := args[0], args[1]
			labels, err := ParseLabels(o.labels)
			if err != nil {
				return err
			}
			if err := frozen.Check(cmd.Context(), "sign", kind, input); err != nil {
				return err
			}
			src, err := o.source.Of(kind, input)
			if err != nil {
				return err
			}
			signer, err := image.KeySignerFrom(o.key)
			if err != nil {
				return err
			}
			command := image.BuildCommand(kind, src.InputName(input), o.labels)
			res, err := image.Sign{Kind: kind, Input: input, Labels: labels, Image: ref, Source: src, Command: command, Signer: signer}.Run(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch o.format {
			case "json":
				return jsonout.Write(out, res)
			default:
				fmt.Fprintf(out, "signed: %s\nsbom: %s\nprovenance: %s\n", res.Image, res.SBOM, res.Provenance)
				for _, s := range res.Signatures {
					fmt.Fprintf(out, "signature: %s\n", s)
				}
				fmt.Fprintf(out, "attestations: %s\n", res.Attestations)
				return nil
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.key, "key", "", "the release's private key (unencrypted ECDSA P-256 PEM); default: the PEM in $"+image.SigningKeyEnv)
	o.source.Register(f)
	f.StringVarP(&o.format, "format", "o", "text", "result format: text or json")
	if kind != image.KindBundle {
		f.StringArrayVar(&o.labels, "label", nil, "extra image label KEY=VALUE the image was built with (repeatable)")
	}
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if o.format != "text" && o.format != "json" {
			return fmt.Errorf("-o %q: want text or json", o.format)
		}
		return nil
	}
	return cmd
}

// ParseLabels reads --label KEY=VALUE flags.
func ParseLabels(given []string) (map[string]string, error) {
	if len(given) == 0 {
		return nil, nil
	}
	labels := map[string]string{}
	for _, l := range given {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want KEY=VALUE", l)
		}
		labels[k] = v
	}
	return labels, nil
}
