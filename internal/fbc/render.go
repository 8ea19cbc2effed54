package fbc

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/template"

	"github.com/sirupsen/logrus"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/operator-registry/alpha/action"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/template/api"
	semvertemplate "github.com/operator-framework/operator-registry/alpha/template/semver"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// Catalog renders one package's catalog from its semver template.
type Catalog struct {
	// Template is the path of channels/<package>.semver.yaml.
	Template string
	// Extras is the path of the catalog extras file; empty means
	// ExtrasPath(Template).
	Extras string
	// Root is the directory bundle references in the template are relative
	// to (the repository root). Empty means the current directory.
	Root string
}

// Run renders the template over the bundle directories and applies the
// catalog extras. The result is sorted and ready for declcfg.WriteYAML.
func (c Catalog) Run(ctx context.Context) (*declcfg.DeclarativeConfig, error) {
	data, err := atomicfs.ReadFile(c.Template)
	if err != nil {
		return nil, fmt.Errorf("read semver template: %w", err)
	}
	extrasPath := c.Extras
	if extrasPath == "" {
		extrasPath = ExtrasPath(c.Template)
	}
	extras, err := ReadExtras(extrasPath)
	if err != nil {
		return nil, err
	}
	t, err := extras.imageRefTemplate()
	if err != nil {
		return nil, fmt.Errorf("%s: imageRefTemplate: %w", extrasPath, err)
	}
	renderer := dirRenderer(c.Root, t)
	cfg, err := RenderTemplate(ctx, bytes.NewReader(data), renderer)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", c.Template, err)
	}
	if err := extras.Apply(cfg); err != nil {
		return nil, fmt.Errorf("apply %s: %w", extrasPath, err)
	}
	Sort(cfg)
	return cfg, nil
}

// RenderTemplate runs operator-registry's semver template over r with the
// given bundle renderer, exactly as `opm alpha render-template semver` does
// with its image renderer. Use DirRenderer for bundle directories.
func RenderTemplate(ctx context.Context, r io.Reader, renderBundle api.BundleRenderer) (*declcfg.DeclarativeConfig, error) {
	// The bundle loader logs on the happy path; opm discards it too.
	logrus.SetOutput(io.Discard)
	tmpl := (&semvertemplate.Factory{}).CreateTemplate(renderBundle)
	return tmpl.Render(ctx, r)
}

// DirRenderer returns a bundle renderer that accepts only bundle directories
// (relative references are joined to root) and sets each bundle's image from
// imageRefTemplate (empty means DefaultImageRefTemplate). The semver template
// matches bundles by their rendered image, so the template is required.
func DirRenderer(root, imageRefTemplate string) (api.BundleRenderer, error) {
	t, err := CatalogExtras{ImageRefTemplate: imageRefTemplate}.imageRefTemplate()
	if err != nil {
		return nil, fmt.Errorf("imageRefTemplate: %w", err)
	}
	return dirRenderer(root, t), nil
}

func dirRenderer(root string, t *template.Template) api.BundleRenderer {
	return func(ctx context.Context, ref string) (*declcfg.DeclarativeConfig, error) {
		dir := ref
		if !filepath.IsAbs(dir) && root != "" {
			dir = filepath.Join(root, dir)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("bundle %q: %s is not a bundle directory (references in channels/ are directories under bundle/, relative to the repository root)", ref, dir)
		}
		cfg, err := action.Render{
			Refs:             []string{dir},
			AllowedRefMask:   action.RefBundleDir,
			ImageRefTemplate: t,
			Registry:         noRegistry{},
		}.Run(ctx)
		if err != nil {
			return nil, fmt.Errorf("bundle %q: %w", ref, err)
		}
		return cfg, nil
	}
}

// Template mirrors operator-registry's semver template input so callers can
// list or rewrite its bundle references (for example to image references, to
// render the same template with opm from a registry).
type Template struct {
	Schema                       string          `json:"schema"`
	GenerateMajorChannels        bool            `json:"generateMajorChannels,omitempty"`
	GenerateMinorChannels        bool            `json:"generateMinorChannels,omitempty"`
	DefaultChannelTypePreference string          `json:"defaultChannelTypePreference,omitempty"`
	Candidate                    TemplateBundles `json:"candidate,omitempty"`
	Fast                         TemplateBundles `json:"fast,omitempty"`
	Stable                       TemplateBundles `json:"stable,omitempty"`
}

// TemplateBundles is one channel type's bundle list.
type TemplateBundles struct {
	Bundles []TemplateBundle `json:"bundles,omitempty"`
}

// TemplateBundle is a bundle reference: a directory under bundle/ in
// channels/, or an image reference for opm.
type TemplateBundle struct {
	Image string `json:"image"`
}

// ParseTemplate reads a semver template strictly.
func ParseTemplate(data []byte) (Template, error) {
	var t Template
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		return Template{}, fmt.Errorf("semver template: %w", err)
	}
	if t.Schema != "olm.semver" {
		return Template{}, fmt.Errorf("semver template: schema is %q, want olm.semver", t.Schema)
	}
	return t, nil
}

// Refs returns every distinct bundle reference, in order of first appearance.
func (t Template) Refs() []string {
	var refs []string
	for _, l := range []TemplateBundles{t.Candidate, t.Fast, t.Stable} {
		for _, b := range l.Bundles {
			if !slices.Contains(refs, b.Image) {
				refs = append(refs, b.Image)
			}
		}
	}
	return refs
}

// MapRefs returns a copy with every bundle reference replaced by f(ref).
func (t Template) MapRefs(f func(string) (string, error)) (Template, error) {
	out := t
	for _, l := range []*TemplateBundles{&out.Candidate, &out.Fast, &out.Stable} {
		bs := slices.Clone(l.Bundles)
		for i := range bs {
			ref, err := f(bs[i].Image)
			if err != nil {
				return Template{}, err
			}
			bs[i].Image = ref
		}
		l.Bundles = bs
	}
	return out, nil
}

// Marshal renders the template as YAML.
func (t Template) Marshal() ([]byte, error) { return yaml.Marshal(t) }

// Sort orders a catalog the way operator-registry's writers do: packages,
// channels, bundles and deprecations by name. Channel entries keep the
// template's order (ascending version), as opm leaves them.
func Sort(cfg *declcfg.DeclarativeConfig) {
	slices.SortFunc(cfg.Packages, func(a, b declcfg.Package) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(cfg.Channels, func(a, b declcfg.Channel) int {
		return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(cfg.Bundles, func(a, b declcfg.Bundle) int {
		return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(cfg.Deprecations, func(a, b declcfg.Deprecation) int { return cmp.Compare(a.Package, b.Package) })
}
