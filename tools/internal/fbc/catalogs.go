package fbc

import (
	"context"
	"fmt"
	"os"
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
		if err := checkListed(t, c.Root); err != nil {
			return nil, err
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

// checkListed fails when a bundle directory sits beside the template's
// bundles (bundle/<package>/<version>) but the template does not list it:
// its release would be left out of the catalog without a word.
func checkListed(templatePath, root string) error {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		return fmt.Errorf("read semver template: %w", err)
	}
	t, err := ParseTemplate(data)
	if err != nil {
		return fmt.Errorf("%s: %w", templatePath, err)
	}
	listed := map[string]bool{}
	var parents []string
	for _, ref := range t.Refs() {
		ref = filepath.Clean(ref)
		if !filepath.IsAbs(ref) && root != "" {
			ref = filepath.Join(root, ref)
		}
		listed[ref] = true
		if p := filepath.Dir(ref); !slices.Contains(parents, p) {
			parents = append(parents, p)
		}
	}
	var missing []string
	for _, parent := range parents {
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue // the renderer names a missing bundle directory
		}
		for _, e := range entries {
			dir := filepath.Join(parent, e.Name())
			if !e.IsDir() || listed[dir] {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, "manifests")); err == nil {
				missing = append(missing, dir)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s does not list the bundle directories %s, so the catalog would leave them out: "+
			"add each as `- image: <directory>` under every channel type it ships in (candidate, fast, stable), "+
			"or delete the directory if that release was never published (see docs/catalog.md)",
			templatePath, strings.Join(missing, ", "))
	}
	return nil
}
