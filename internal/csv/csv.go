// Package csv builds a ClusterServiceVersion from a hand-edited base CSV and
// the generated parts of a release (install strategy, RBAC, owned CRDs,
// examples, images), keeping what the base CSV says; and maps the RBAC of the
// operator's manifests (package manifests) to a CSV's permissions.
package csv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"unicode"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/manifests"
)

// Annotation keys the generator owns.
const (
	AnnotationContainerImage = "containerImage"
	AnnotationCreatedAt      = "createdAt"
	AnnotationALMExamples    = "alm-examples"
)

// Generator holds the generated parts of one package's CSV.
type Generator struct {
	// Package is the OLM package name; the CSV is named <Package>.v<Version>.
	Package string
	// Version is the operator version.
	Version semver.Version
	// CreatedAt is the release time (RFC 3339), never the wall clock.
	CreatedAt string
	// MinKubeVersion is the lowest supported Kubernetes version.
	MinKubeVersion string
	// ContainerImage is the operator image.
	ContainerImage string
	// RelatedImages lists every image the bundle may run.
	RelatedImages []v1alpha1.RelatedImage
	// Deployments is the install strategy.
	Deployments []v1alpha1.StrategyDeploymentSpec
	// ClusterPermissions and Permissions come from the RBAC bound to the
	// operator's service account.
	ClusterPermissions, Permissions []v1alpha1.StrategyDeploymentPermissions
	// OwnedCRDs are the CRDs the CSV owns.
	OwnedCRDs []apiextensionsv1.CustomResourceDefinition
	// Examples are the samples for alm-examples.
	Examples []map[string]any
}

// LoadBase reads a base CSV.
func LoadBase(path string) (*v1alpha1.ClusterServiceVersion, error) {
	data, err := atomicfs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("base CSV %s does not exist: create it with the package's description, icon, "+
			"keywords, maintainers, links, provider and maturity (see docs/release.md)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("base CSV: %w", err)
	}
	var csv v1alpha1.ClusterServiceVersion
	if err := yaml.UnmarshalStrict(data, &csv); err != nil {
		return nil, fmt.Errorf("base CSV %s: %w", path, err)
	}
	if csv.Kind != "ClusterServiceVersion" {
		return nil, fmt.Errorf("base CSV %s: kind is %q, want ClusterServiceVersion", path, csv.Kind)
	}
	return &csv, nil
}

// Generate returns the CSV: base with the generated parts merged in. Base
// annotations, relatedImages and CRD descriptions are kept; the release's
// containerImage and createdAt replace any in the base.
func (g Generator) Generate(base *v1alpha1.ClusterServiceVersion) (*v1alpha1.ClusterServiceVersion, error) {
	csv := base.DeepCopy()
	csv.APIVersion = v1alpha1.SchemeGroupVersion.String()
	csv.Kind = "ClusterServiceVersion"
	csv.Name = fmt.Sprintf("%s.v%s", g.Package, g.Version)
	csv.Namespace = ""
	csv.Status = v1alpha1.ClusterServiceVersionStatus{}
	csv.Spec.Version = version.OperatorVersion{Version: g.Version}
	csv.Spec.MinKubeVersion = g.MinKubeVersion
	if len(csv.Spec.CustomResourceDefinitions.Required) > 0 {
		return nil, fmt.Errorf("base CSV of %s: spec.customresourcedefinitions.required is set: OLM v1 refuses "+
			"bundles that require APIs; remove it (the CRDs ship in inferencestack-crds)", g.Package)
	}
	if csv.Spec.Replaces != "" || len(csv.Spec.Skips) > 0 {
		return nil, fmt.Errorf("base CSV of %s: spec.replaces/skips are set: upgrade edges come from the catalog's "+
			"semver template; remove them", g.Package)
	}

	if csv.Annotations == nil {
		csv.Annotations = map[string]string{}
	}
	if g.ContainerImage != "" {
		csv.Annotations[AnnotationContainerImage] = g.ContainerImage
	}
	csv.Annotations[AnnotationCreatedAt] = g.CreatedAt
	if _, ok := csv.Annotations[AnnotationALMExamples]; !ok {
		examples, err := almExamples(g.Examples)
		if err != nil {
			return nil, err
		}
		csv.Annotations[AnnotationALMExamples] = examples
	}

	modes, err := installModes(csv.Spec.InstallModes)
	if err != nil {
		return nil, fmt.Errorf("base CSV of %s: %w", g.Package, err)
	}
	csv.Spec.InstallModes = modes

	csv.Spec.InstallStrategy = v1alpha1.NamedInstallStrategy{
		StrategyName: v1alpha1.InstallStrategyNameDeployment,
		StrategySpec: v1alpha1.StrategyDetailsDeployment{
			DeploymentSpecs:    g.Deployments,
			ClusterPermissions: g.ClusterPermissions,
			Permissions:        g.Permissions,
		},
	}
	if csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs == nil {
		csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs = []v1alpha1.StrategyDeploymentSpec{}
	}

	owned, err := ownedCRDs(csv.Spec.CustomResourceDefinitions.Owned, g.OwnedCRDs)
	if err != nil {
		return nil, fmt.Errorf("base CSV of %s: %w", g.Package, err)
	}
	csv.Spec.CustomResourceDefinitions.Owned = owned
	csv.Spec.RelatedImages = relatedImages(csv.Spec.RelatedImages, g.RelatedImages)
	return csv, nil
}

func almExamples(examples []map[string]any) (string, error) {
	if len(examples) == 0 {
		return "[]", nil // a package without CRDs; the validators want the annotation
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(examples); err != nil {
		return "", fmt.Errorf("encoding alm-examples: %w", err)
	}
	return strings.TrimSpace(buf.String()), nil
}

// installModes returns the base's install modes with AllNamespaces supported
// (OLM v1 installs only in that mode), defaulting the others to unsupported.
func installModes(base []v1alpha1.InstallMode) ([]v1alpha1.InstallMode, error) {
	set := map[v1alpha1.InstallModeType]bool{
		v1alpha1.InstallModeTypeOwnNamespace:    false,
		v1alpha1.InstallModeTypeSingleNamespace: false,
		v1alpha1.InstallModeTypeMultiNamespace:  false,
		v1alpha1.InstallModeTypeAllNamespaces:   true,
	}
	for _, m := range base {
		if _, ok := set[m.Type]; !ok {
			return nil, fmt.Errorf("spec.installModes: unknown type %q", m.Type)
		}
		if m.Type == v1alpha1.InstallModeTypeAllNamespaces && !m.Supported {
			return nil, errors.New("spec.installModes: AllNamespaces is unsupported, but OLM v1 installs only in " +
				"AllNamespaces mode: set it to supported: true")
		}
		set[m.Type] = m.Supported
	}
	var out []v1alpha1.InstallMode
	for _, t := range []v1alpha1.InstallModeType{v1alpha1.InstallModeTypeOwnNamespace, v1alpha1.InstallModeTypeSingleNamespace,
		v1alpha1.InstallModeTypeMultiNamespace, v1alpha1.InstallModeTypeAllNamespaces} {
		out = append(out, v1alpha1.InstallMode{Type: t, Supported: set[t]})
	}
	return out, nil
}

// ownedCRDs describes every served version of each CRD, keeping what the base
// says about it and filling the rest from the CRD.
func ownedCRDs(base []v1alpha1.CRDDescription, crds []apiextensionsv1.CustomResourceDefinition) ([]v1alpha1.CRDDescription, error) {
	var out []v1alpha1.CRDDescription
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			d := v1alpha1.CRDDescription{Name: crd.Name, Version: v.Name, Kind: crd.Spec.Names.Kind}
			if i := slices.IndexFunc(base, func(b v1alpha1.CRDDescription) bool {
				return b.Name == d.Name && b.Version == d.Version && b.Kind == d.Kind
			}); i >= 0 {
				d = base[i]
			}
			if d.DisplayName == "" {
				d.DisplayName = displayName(crd.Spec.Names.Kind)
			}
			if d.Description == "" && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				d.Description = firstSentence(v.Schema.OpenAPIV3Schema.Description)
			}
			out = append(out, d)
		}
	}
	for _, b := range base {
		if !slices.ContainsFunc(out, func(d v1alpha1.CRDDescription) bool {
			return b.Name == d.Name && b.Version == d.Version && b.Kind == d.Kind
		}) {
			return nil, fmt.Errorf("spec.customresourcedefinitions.owned names %s %s (%s), which the bundle's CRDs do not serve: "+
				"fix or remove that entry", b.Name, b.Version, b.Kind)
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.CRDDescription) int {
		return strings.Compare(a.Name+"/"+a.Version, b.Name+"/"+b.Version)
	})
	return out, nil
}

// displayName splits a kind into words: InferenceStack -> Inference Stack.
func displayName(kind string) string {
	var b strings.Builder
	runes := []rune(kind)
	for i, r := range runes {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(runes[i-1]) ||
			(i+1 < len(runes) && unicode.IsLower(runes[i+1]))) {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// firstSentence keeps the first paragraph of a type's doc comment.
func firstSentence(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n\n")
	return strings.Join(strings.Fields(s), " ")
}

// relatedImages merges generated images into the base's: a generated name
// replaces a base entry with that name, other base entries are kept. Sorted
// by name.
func relatedImages(base, generated []v1alpha1.RelatedImage) []v1alpha1.RelatedImage {
	byName := map[string]string{}
	for _, r := range base {
		byName[r.Name] = r.Image
	}
	for _, r := range generated {
		byName[r.Name] = r.Image
	}
	var out []v1alpha1.RelatedImage
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, v1alpha1.RelatedImage{Name: n, Image: byName[n]})
	}
	return out
}

// Marshal encodes a CSV as YAML without status or creationTimestamp.
func Marshal(csv *v1alpha1.ClusterServiceVersion) ([]byte, error) {
	return manifests.Marshal(csv, "status")
}
