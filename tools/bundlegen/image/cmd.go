// Package image is the `bundlegen image` command: it builds bundle, catalog
// and operator images without a container engine.
package image

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/internal/validate"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/frozen"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/jsonout"
)

// options are the flags shared by `image bundle` and `image catalog`.
type options struct {
	output string
	tag    string
	push   string
	labels []string
	format string
}

// NewCmd returns the `image` command with its `bundle`, `catalog` and
// `operator` subcommands.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build bundle, catalog and operator images without a container engine",
		Long: `Build OLM images with go-containerregistry: no Docker, no daemon.

Each image is assembled from files only (nothing is pulled), with every
timestamp at the Unix epoch, so the same input gives the same digest. Write it to an OCI layout folder
(--output), push it (--push), or both. --output writes only a missing or empty
folder, or one that holds a layout bundlegen wrote, never an input. --push is a
publish gate: every image the bundle or catalog names must be by digest. Registries on 127.0.0.1, ::1 or
localhost are reached over plain HTTP; others need HTTPS and take credentials
from ~/.docker/config.json.`,
	}
	cmd.AddCommand(
		newKindCmd(image.KindBundle, "bundle DIR", "Build the registry+v1 bundle image of a bundle directory",
			`DIR holds manifests/ and metadata/ (bundle/<package>/<version>). The image
holds /manifests and /metadata and is labelled with the annotations of
metadata/annotations.yaml, as the bundle.Dockerfile of opm would.`,
			"  bundlegen image bundle bundle/inferencestack-operator/1.2.0 --push quay.io/acme/inferencestack-operator-bundle:v1.2.0"),
		newKindCmd(image.KindCatalog, "catalog DIR", "Build the file-based catalog image of a catalog directory",
			`DIR holds <package>/catalog.yaml (catalog/). Its files land under /configs,
as COPY catalog /configs in Dockerfile.catalog, and the image is labelled
operators.operatorframework.io.index.configs.v1=/configs, which is what
catalogd reads. Files that are not YAML or JSON (graph.svg, graph.md) must be
listed in DIR/.indexignore, or catalogd and opm fail to load the image. It
holds no opm binary: see docs/images.md.`,
			"  bundlegen image catalog catalog --output out/catalog --tag v1.2.0"),
		newKindCmd(image.KindOperator, "operator BINARY", "Build the operator image from the static manager binary",
			`BINARY is the operator's manager built for Linux with CGO_ENABLED=0 (make
image-operator builds it from the current commit, then calls this). The image
has two layers: a base assembled here, nothing pulled (/etc/passwd and
/etc/group with root, nobody and nonroot 65532, /tmp, /home/nonroot), and the
binary at /manager, the entrypoint. It runs as 65532:65532; its
architecture is the binary's. The same binary and labels give the same
digest. See docs/images.md for how it compares with the Dockerfile's image.`,
			"  bundlegen image operator bin/images/manager --output bin/images/operator --tag v1.2.0 \\\n"+
				"    --label org.opencontainers.image.revision=$(git rev-parse HEAD)"),
	)
	return cmd
}

func newKindCmd(kind image.Kind, use, short, long, example string) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b := image.Build{Kind: kind, Dir: args[0], Layout: o.output, Tag: o.tag, Push: o.push}
			if len(o.labels) > 0 {
				if kind == image.KindBundle {
					return fmt.Errorf("--label applies to catalog and operator images only; bundle labels come from metadata/annotations.yaml")
				}
				b.Labels = map[string]string{}
				for _, l := range o.labels {
					k, v, ok := strings.Cut(l, "=")
					if !ok || k == "" {
						return fmt.Errorf("--label %q: want KEY=VALUE", l)
					}
					b.Labels[k] = v
				}
			}
			if o.push != "" {
				if err := pushGate(cmd, kind, args[0]); err != nil {
					return err
				}
			}
			res, err := b.Run(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch o.format {
			case "json":
				return jsonout.Write(out, res)
			case "text":
				fmt.Fprintf(out, "digest: %s\n", res.Digest)
				if res.Layout != "" {
					fmt.Fprintf(out, "layout: %s\n", res.Layout)
				}
				if res.Pushed != "" {
					fmt.Fprintf(out, "pushed: %s\n", res.Pushed)
				}
				return nil
			default:
				return fmt.Errorf("-o %q: want text or json", o.format)
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.output, "output", "", "OCI layout folder to write: missing, empty, or a layout bundlegen wrote (then replaced)")
	f.StringVar(&o.tag, "tag", "", "image name recorded in the OCI layout (org.opencontainers.image.ref.name)")
	f.StringVar(&o.push, "push", "", "image reference to push to, e.g. quay.io/acme/catalog:v1 (every image the bundle or catalog names must be by digest)")
	f.StringVarP(&o.format, "format", "o", "text", "result format: text or json")
	if kind != image.KindBundle {
		f.StringArrayVar(&o.labels, "label", nil, "extra image label KEY=VALUE (repeatable)")
	}
	return cmd
}

// pushGate refuses to push a bundle or catalog that names any image by tag
// (or a catalog with any other finding): what is published must name exactly
// the images it was tested with.
func pushGate(cmd *cobra.Command, kind image.Kind, dir string) error {
	if err := frozen.Check(cmd.Context(), "push", kind, dir); err != nil {
		return err
	}
	var lines []string
	switch kind {
	case image.KindBundle:
		findings, err := validate.Digests(dir)
		if err != nil {
			return err
		}
		for _, f := range findings {
			lines = append(lines, "  "+f.String())
		}
	case image.KindCatalog:
		findings, err := validate.Catalog{Dir: dir, RequireDigests: true}.Run(cmd.Context())
		if err != nil {
			return err
		}
		for _, f := range findings {
			lines = append(lines, "  "+f.String())
		}
	}
	if len(lines) > 0 {
		return fmt.Errorf("refusing to push %s: the publish gate requires every image by digest and a valid catalog (bundlegen validate ... --require-digests):\n%s",
			dir, strings.Join(lines, "\n"))
	}
	return nil
}
