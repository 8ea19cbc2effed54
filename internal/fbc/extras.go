package fbc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/image"
)

// DefaultImageRefTemplate is the bundle image reference used when the
// catalog extras do not set one. It is a Go text/template over the bundle's
// .Package, .Name and .Version, as in `opm render --alpha-image-ref-template`.
const DefaultImageRefTemplate = "quay.io/inferencestack/{{.Package}}-bundle:v{{.Version}}"

// CatalogExtras holds what a package's semver template cannot say about its
// catalog. It is read from channels/<package>.release.yaml, beside
// channels/<package>.semver.yaml, which stays a plain operator-registry
// semver template. It is not a release input (release.Input,
// channels/releases/<version>.yaml), from which the bundles are made.
type CatalogExtras struct {
	// ImageRefTemplate builds each bundle's published image reference from
	// its package, name and version. Empty means DefaultImageRefTemplate.
	ImageRefTemplate string `json:"imageRefTemplate,omitempty"`
	// Images pins the published image of individual bundles by version,
	// typically to a digest (repo@sha256:...) once the bundle image is
	// pushed; it wins over ImageRefTemplate.
	Images map[string]string `json:"images,omitempty"`
	// DefaultChannel overrides the default channel the semver template picks
	// (its most stable, highest channel). It must name a rendered channel.
	DefaultChannel string `json:"defaultChannel,omitempty"`
	// Deprecations marks the package, channels or bundles deprecated.
	Deprecations Deprecations `json:"deprecations,omitempty"`
	// Bridges are opt-in upgrade edges across a major version, which the
	// semver template never generates. Empty by default.
	Bridges []Bridge `json:"bridges,omitempty"`
}

// Deprecations lists what to deprecate, each with the message users see.
type Deprecations struct {
	// Package deprecates the whole package when not empty.
	Package string `json:"package,omitempty"`
	// Channels maps a channel name to its deprecation message.
	Channels map[string]string `json:"channels,omitempty"`
	// Bundles maps a bundle version (e.g. "1.0.0") to its deprecation message.
	Bundles map[string]string `json:"bundles,omitempty"`
}

// Bridge adds a skipRange to one bundle's channel entries, so that OLM v1
// offers that bundle as a direct upgrade from every installed version in the
// range, across a major version boundary.
type Bridge struct {
	// Bundle is the version of the bundle that receives the skipRange,
	// typically the first bundle of the new major (e.g. "2.0.0").
	Bundle string `json:"bundle"`
	// SkipRange is a blang/semver range, as OLM reads it (e.g. ">=1.0.0 <2.0.0").
	SkipRange string `json:"skipRange"`
	// Channels limits the bridge to these channels. Empty means every
	// channel that holds the bundle.
	Channels []string `json:"channels,omitempty"`
}

// ExtrasPath returns the catalog extras file that belongs to a semver
// template: channels/<package>.semver.yaml -> channels/<package>.release.yaml.
func ExtrasPath(templatePath string) string {
	dir, base := filepath.Split(templatePath)
	return filepath.Join(dir, strings.TrimSuffix(base, ".semver.yaml")+".release.yaml")
}

// ReleasePath is ExtrasPath under its former name, kept while callers
// outside this package move to ExtrasPath.
func ReleasePath(templatePath string) string { return ExtrasPath(templatePath) }

// ReadExtras reads a catalog extras file. A missing file yields the zero
// CatalogExtras (default image template, no deprecations, no bridges).
func ReadExtras(path string) (CatalogExtras, error) {
	data, err := atomicfs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return CatalogExtras{}, nil
	}
	if err != nil {
		return CatalogExtras{}, fmt.Errorf("read catalog extras: %w", err)
	}
	return ParseExtras(path, data)
}

// ParseRelease is ParseExtras under its former name, kept while callers
// outside this package move to ParseExtras.
func ParseRelease(name string, data []byte) (CatalogExtras, error) { return ParseExtras(name, data) }

// ParseExtras parses and checks a catalog extras file's content; name is
// used in errors.
func ParseExtras(name string, data []byte) (CatalogExtras, error) {
	var r CatalogExtras
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		return CatalogExtras{}, fmt.Errorf("%s: %w (fields: imageRefTemplate, defaultChannel, deprecations, bridges)", name, err)
	}
	if _, err := r.imageRefTemplate(); err != nil {
		return CatalogExtras{}, fmt.Errorf("%s: imageRefTemplate: %w", name, err)
	}
	for v, ref := range r.Images {
		if _, err := semver.Parse(v); err != nil {
			return CatalogExtras{}, fmt.Errorf("%s: images: key %q is not a semver version: %w", name, v, err)
		}
		if err := image.CheckReference(ref); err != nil {
			return CatalogExtras{}, fmt.Errorf("%s: images[%q]: %w: give the bundle's published image, e.g. quay.io/inferencestack/<package>-bundle@sha256:<digest>", name, v, err)
		}
	}
	for v, msg := range r.Deprecations.Bundles {
		if _, err := semver.Parse(v); err != nil {
			return CatalogExtras{}, fmt.Errorf("%s: deprecations.bundles: key %q is not a semver version: %w", name, v, err)
		}
		if msg == "" {
			return CatalogExtras{}, fmt.Errorf("%s: deprecations.bundles[%q]: give a message", name, v)
		}
	}
	for c, msg := range r.Deprecations.Channels {
		if msg == "" {
			return CatalogExtras{}, fmt.Errorf("%s: deprecations.channels[%q]: give a message", name, c)
		}
	}
	for i, b := range r.Bridges {
		if _, err := semver.Parse(b.Bundle); err != nil {
			return CatalogExtras{}, fmt.Errorf("%s: bridges[%d].bundle: %q is not a semver version: %w", name, i, b.Bundle, err)
		}
		if _, err := semver.ParseRange(b.SkipRange); err != nil {
			return CatalogExtras{}, fmt.Errorf("%s: bridges[%d].skipRange: %q is not a valid range (e.g. \">=1.0.0 <2.0.0\"): %w", name, i, b.SkipRange, err)
		}
	}
	return r, nil
}

func (r CatalogExtras) imageRefTemplate() (*template.Template, error) {
	text := r.ImageRefTemplate
	if text == "" {
		text = DefaultImageRefTemplate
	}
	// Pinned images win; operator-registry executes this template with the
	// bundle's .Package, .Name and .Version.
	pinned := func(version string) string { return r.Images[version] }
	t, err := template.New("imageRef").Option("missingkey=error").
		Funcs(template.FuncMap{"pinnedImage": pinned}).
		Parse("{{with pinnedImage .Version}}{{.}}{{else}}" + text + "{{end}}")
	if err != nil {
		return nil, err
	}
	// Fail early on fields operator-registry does not provide, and on
	// templates that do not make an image reference.
	var buf bytes.Buffer
	sample := struct{ Package, Name, Version string }{"inferencestack-operator", "inferencestack-operator.v1.0.0", "1.0.0"}
	if err := t.Execute(&buf, sample); err != nil {
		return nil, fmt.Errorf("use only {{.Package}}, {{.Name}} and {{.Version}}: %w", err)
	}
	if r.Images[sample.Version] == "" {
		if err := image.CheckReference(buf.String()); err != nil {
			return nil, fmt.Errorf("for package %s version %s it makes %w: write a template such as %s", sample.Package, sample.Version, err, DefaultImageRefTemplate)
		}
	}
	return t, nil
}
