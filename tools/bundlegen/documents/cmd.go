// Package documents is the `bundlegen documents` command: it writes the SBOM
// and provenance of an image to files, offline and without a key.
package documents

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/gitsource"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/jsonout"
	"github.com/inferencestack/inferencestack/tools/bundlegen/sign"
)

type options struct {
	image  string
	output string
	source gitsource.Flags
	labels []string
	format string
}

// NewCmd returns the `documents` command with its `bundle`, `catalog` and
// `operator` subcommands.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "documents",
		Short: "Write the SBOM and provenance of an image to files (offline, no key)",
		Long: `Build an image from its input, as bundlegen image does, and write the SPDX
SBOM (` + image.SBOMFile + `) and the in-toto SLSA provenance (` + image.ProvenanceFile + `) that
bundlegen sign would attach to it, byte for byte, to the folder --output
(missing, empty, or holding only those two files, which are replaced). Nothing
is pushed and no key is needed: the same commit gives the same bytes anywhere.
--image names the image's repository, the subject of both documents. See
docs/release.md.`,
	}
	cmd.AddCommand(
		newKindCmd(image.KindBundle, "bundle DIR", "The SBOM and provenance of the bundle image built from DIR",
			"  bundlegen documents bundle bundle/inferencestack-operator/1.2.0 --image quay.io/acme/inferencestack-operator-bundle --output out/docs"),
		newKindCmd(image.KindCatalog, "catalog DIR", "The SBOM and provenance of the catalog image built from DIR",
			"  bundlegen documents catalog catalog --image quay.io/acme/inferencestack-catalog --output out/docs"),
		newKindCmd(image.KindOperator, "operator BINARY", "The SBOM and provenance of the operator image built from the manager BINARY",
			"  bundlegen documents operator bin/images/manager --image quay.io/acme/inferencestack-operator --output out/docs \\\n"+
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
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.format != "text" && o.format != "json" {
				return fmt.Errorf("-o %q: want text or json", o.format)
			}
			if o.image == "" || o.output == "" {
				return fmt.Errorf("give the image's repository (--image) and the folder to write (--output)")
			}
			input := args[0]
			labels, err := sign.ParseLabels(o.labels)
			if err != nil {
				return err
			}
			res, err := image.Documents{Kind: kind, Input: input, Labels: labels, Repository: o.image, SourceOf: o.source.Of,
				LabelArgs: o.labels, Output: o.output}.Run(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if o.format == "json" {
				return jsonout.Write(out, res)
			}
			fmt.Fprintf(out, "image: %s\nsbom: %s\nprovenance: %s\n", res.Image, res.SBOM, res.Provenance)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.image, "image", "", "the image's repository, without tag or digest (the documents' subject)")
	f.StringVar(&o.output, "output", "", "folder to write "+image.SBOMFile+" and "+image.ProvenanceFile+" to")
	o.source.Register(f)
	f.StringVarP(&o.format, "format", "o", "text", "result format: text or json")
	if kind != image.KindBundle {
		f.StringArrayVar(&o.labels, "label", nil, "extra image label KEY=VALUE the image is built with (repeatable)")
	}
	return cmd
}
