// Tag-only images: a warning while a release is being prepared, an error
// under the publish gates (--require-digests, image --push).

package validate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	corev1 "k8s.io/api/core/v1"

	"github.com/inferencestack/inferencestack/internal/csv"
	"github.com/inferencestack/inferencestack/internal/image"
)

const tagAdvice = "a tag may come to name another image; record its digest (bundlegen pin --resolve), regenerate, and publish only then"

// checkDigests reports, once per image, each image the CSV names by tag and
// every field that names it: a warning, or an error when requireDigests.
func checkDigests(c *v1alpha1.ClusterServiceVersion, file string, requireDigests bool) []Finding {
	var order []string
	uses := map[string][]string{}
	use := func(field, img string) {
		if img == "" || image.HasDigest(img) {
			return
		}
		if _, ok := uses[img]; !ok {
			order = append(order, img)
		}
		uses[img] = append(uses[img], field)
	}
	use("metadata.annotations.containerImage", c.Annotations[csv.AnnotationContainerImage])
	for i, ri := range c.Spec.RelatedImages {
		use(fmt.Sprintf("spec.relatedImages[%d].image", i), ri.Image)
	}
	for i, d := range c.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		pod := d.Spec.Template.Spec
		for kind, cs := range map[string][]corev1.Container{"initContainers": pod.InitContainers, "containers": pod.Containers} {
			for j, ct := range cs {
				base := fmt.Sprintf("spec.install.spec.deployments[%d].spec.template.spec.%s[%d]", i, kind, j)
				use(base+".image", ct.Image)
				for k, e := range ct.Env {
					if strings.HasPrefix(e.Name, "RELATED_IMAGE_") {
						use(fmt.Sprintf("%s.env[%d].value (%s)", base, k, e.Name), e.Value)
					}
				}
			}
		}
	}
	sev, gate := SeverityWarning, ""
	if requireDigests {
		sev, gate = SeverityError, " (--require-digests)"
	}
	var out []Finding
	for _, img := range order {
		fields := uses[img]
		slices.Sort(fields)
		also := ""
		if len(fields) > 1 {
			also = " (also in " + strings.Join(fields[1:], ", ") + ")"
		}
		out = append(out, Finding{Severity: sev, Source: "bundlegen", File: file, Field: fields[0],
			Message: fmt.Sprintf("image %s is named by tag, not digest%s%s: %s", img, gate, also, tagAdvice)})
	}
	return out
}

// Digests returns, for the bundle in dir, a finding for every image its CSV
// names by tag, each an error: the gate of `bundlegen image bundle --push`.
func Digests(dir string) ([]Finding, error) {
	c, file, err := bundleCSV(dir)
	if err != nil {
		return nil, err
	}
	return checkDigests(c, file, true), nil
}

// catalogDigests reports, for package p, each bundle image and related
// image a catalog names by tag (rule image-not-digest).
func catalogDigests(cfg declcfg.DeclarativeConfig, p declcfg.Package, channelsOf func(bundle string) string) []CatalogFinding {
	var out []CatalogFinding
	for _, b := range cfg.Bundles {
		if b.Package != p.Name {
			continue
		}
		if !image.HasDigest(b.Image) {
			out = append(out, CatalogFinding{Package: p.Name, Channel: channelsOf(b.Name), Bundle: b.Name, Rule: RuleImageNotDigest,
				Message: fmt.Sprintf("bundle image %q is not pinned by digest; publish the bundle image and reference it as <repo>@sha256:<digest> (images: in channels/%s.release.yaml)", b.Image, p.Name)})
		}
		for _, ri := range b.RelatedImages {
			if ri.Image == b.Image || image.HasDigest(ri.Image) {
				continue
			}
			out = append(out, CatalogFinding{Package: p.Name, Channel: channelsOf(b.Name), Bundle: b.Name, Rule: RuleImageNotDigest,
				Message: fmt.Sprintf("related image %q (%s) is not pinned by digest: %s", ri.Image, cmpOr(ri.Name, "unnamed"), tagAdvice)})
		}
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
