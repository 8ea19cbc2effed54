package opmequiv_test

import (
	"bytes"
	"context"
	"fmt"
	"text/template"

	"github.com/operator-framework/operator-registry/alpha/action"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	alphatemplate "github.com/operator-framework/operator-registry/alpha/template"
)

// renderDirs renders a semver template over bundle directories with no
// registry: each image the template lists is rendered from the directory whose
// image reference (refTemplate) it is.
func renderDirs(ctx context.Context, tmplYAML []byte, dirs []string, refTemplate string) (*declcfg.DeclarativeConfig, error) {
	refTmpl, err := template.New("ref").Parse(refTemplate)
	if err != nil {
		return nil, err
	}
	byRef := map[string]*declcfg.DeclarativeConfig{}
	for _, dir := range dirs {
		cfg, err := action.Render{Refs: []string{dir}, AllowedRefMask: action.RefBundleDir, ImageRefTemplate: refTmpl}.Run(ctx)
		if err != nil {
			return nil, err
		}
		byRef[cfg.Bundles[0].Image] = cfg
	}
	render := alphatemplate.BundleRenderer(func(_ context.Context, ref string) (*declcfg.DeclarativeConfig, error) {
		cfg, ok := byRef[ref]
		if !ok {
			return nil, fmt.Errorf("no bundle directory renders as %s", ref)
		}
		return cfg, nil
	})
	tmpl, err := alphatemplate.NewRegistry().CreateTemplateByType("semver", render)
	if err != nil {
		return nil, err
	}
	return tmpl.Render(ctx, bytes.NewReader(tmplYAML))
}
