package fbc

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// TemplateSuffix names a package's semver template in channels/.
const TemplateSuffix = ".semver.yaml"

// Catalogs renders every package template in a channels directory.
type Catalogs struct {
	// ChannelsDir holds <package>.semver.yaml (+ <package>.release.yaml).
	ChannelsDir string
	// Root is the directory bundle references are relative to.
	Root string
	// OutDir receives <package>/catalog.yaml.
	OutDir string
	// Packages limits the run to these packages; empty means all.
	Packages []string
}

// Run renders and writes each package's catalog, returning the written paths.
// Nothing is written unless every package renders.
func (c Catalogs) Run(ctx context.Context) ([]string, error) {
	templates, err := filepath.Glob(filepath.Join(c.ChannelsDir, "*"+TemplateSuffix))
	if err != nil {
		return nil, err
	}
	slices.Sort(templates)
	found := map[string]string{}
	for _, t := range templates {
		found[strings.TrimSuffix(filepath.Base(t), TemplateSuffix)] = t
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no *%s templates in %s; add channels/<package>%s (see docs/catalog.md)", TemplateSuffix, c.ChannelsDir, TemplateSuffix)
	}
	names := c.Packages
	if len(names) == 0 {
		names = sortedKeys(found)
	}
	var rendered [][]byte
	for _, name := range names {
		t, ok := found[name]
		if !ok {
			return nil, fmt.Errorf("no template %s for package %q", filepath.Join(c.ChannelsDir, name+TemplateSuffix), name)
		}
		cfg, err := Catalog{Template: t, Root: c.Root}.Run(ctx)
		if err != nil {
			return nil, err
		}
		if got := cfg.Packages[0].Name; got != name {
			return nil, fmt.Errorf("%s renders package %q: rename the file to %s%s or fix its bundles", t, got, got, TemplateSuffix)
		}
		data, err := Marshal(*cfg)
		if err != nil {
			return nil, err
		}
		rendered = append(rendered, data)
	}
	var written []string
	for i, name := range names {
		path := filepath.Join(c.OutDir, name, CatalogFile)
		if err := WriteFileAtomic(path, rendered[i]); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}
