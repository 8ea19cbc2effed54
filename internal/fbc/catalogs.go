package fbc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/operator-framework/operator-registry/alpha/declcfg"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/validate"
)

// TemplateSuffix names a package's semver template in channels/.
const TemplateSuffix = ".semver.yaml"

// ExtrasSuffix names a package's catalog extras in channels/, beside its
// template.
const ExtrasSuffix = ".release.yaml"

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
	// CheckBundle, when set, is called with every bundle directory a
	// template references, before anything is rendered; an error stops the
	// run (the release tools check that the bundle is exactly what its
	// release input makes).
	CheckBundle func(dir string) error
	// CheckCatalog, when set, is called with a folder holding the new
	// catalog (every package) once it validates; an error stops the run
	// (the release tools check the compatibility matrix).
	CheckCatalog func(ctx context.Context, dir string) error
	// DefaultOutput says OutDir is the repository's catalog/ (the flag's
	// default), not a path the user typed: the checks against typos such as
	// `-o .` do not apply to it.
	DefaultOutput bool
}

// Run renders each package's catalog and writes them all in one
// transaction (atomicfs.Tx): OutDir gets all the new catalogs or none.
// Nothing is written unless every package renders and the new catalog
// folder passes validate.Catalog. Only the rendered catalog.yaml files are
// written, every other file of OutDir stays; a catalog.yaml that is not the
// catalog of its package is never overwritten. It returns the written paths.
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
	extras, err := filepath.Glob(filepath.Join(c.ChannelsDir, "*"+ExtrasSuffix))
	if err != nil {
		return nil, err
	}
	for _, e := range extras {
		pkg := strings.TrimSuffix(filepath.Base(e), ExtrasSuffix)
		if _, ok := found[pkg]; !ok {
			return nil, fmt.Errorf("%s has no semver template %s beside it, so nothing would read it: "+
				"name it after its package's template (packages: %s), or remove it", e, filepath.Join(c.ChannelsDir, pkg+TemplateSuffix),
				strings.Join(slices.Sorted(maps.Keys(found)), ", "))
		}
	}
	names := c.Packages
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(found))
	}
	inputs := []string{c.ChannelsDir}
	for _, name := range names {
		if err := atomicfs.CheckName("package", "--package or the template's file name in "+c.ChannelsDir, name); err != nil {
			return nil, err
		}
		t, ok := found[name]
		if !ok {
			return nil, fmt.Errorf("no template %s for package %q", filepath.Join(c.ChannelsDir, name+TemplateSuffix), name)
		}
		if err := checkListed(t, c.Root); err != nil {
			return nil, err
		}
		dirs, err := c.bundleDirs(t)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, dirs...)
	}
	if err := (atomicfs.Output{Flag: "--output", Path: c.OutDir, Default: c.DefaultOutput, Owns: []string{"catalog"}, Inputs: inputs}).Check(); err != nil {
		return nil, err
	}
	// A stopped run is finished or undone first; then no link and nothing
	// that blocks when opened, in the output or the inputs, before anything
	// is read.
	if err := atomicfs.Recover(c.OutDir); err != nil {
		return nil, err
	}
	for i, dir := range append([]string{c.OutDir}, inputs...) {
		if i > 1 { // a bundle folder: none of its parents below Root may be a link either
			if err := atomicfs.CheckPath(c.Root, dir); err != nil {
				return nil, err
			}
		}
		if _, err := os.Lstat(dir); err == nil {
			if err := atomicfs.CheckTree(dir); err != nil {
				return nil, err
			}
		}
	}
	if c.CheckBundle != nil {
		for _, dir := range inputs[1:] {
			if err := c.CheckBundle(dir); err != nil {
				return nil, err
			}
		}
	}
	rendered := map[string][]byte{}
	for _, name := range names {
		t := found[name]
		cfg, err := Catalog{Template: t, Root: c.Root}.Run(ctx)
		if err != nil {
			return nil, err
		}
		if got := cfg.Packages[0].Name; got != name {
			return nil, fmt.Errorf("%s renders package %q: rename the file to %s%s or fix its bundles", t, got, got, TemplateSuffix)
		}
		if err := c.checkOwn(name); err != nil {
			return nil, err
		}
		if rendered[name], err = MarshalCatalog(*cfg); err != nil {
			return nil, err
		}
	}
	if err := c.validate(ctx, rendered); err != nil {
		return nil, err
	}
	tx, err := atomicfs.Begin(ctx, c.OutDir)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	for _, name := range names {
		tx.Write(filepath.Join(c.OutDir, name, CatalogFile), rendered[name])
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("%w; %s is unchanged", err, c.OutDir)
	}
	var written []string
	for _, name := range names {
		written = append(written, filepath.Join(c.OutDir, name, CatalogFile))
	}
	return written, nil
}

// checkListed fails when a bundle directory sits beside the template's
// bundles (bundle/<package>/<version>) but the template does not list it:
// its release would be left out of the catalog without a word.
func checkListed(templatePath, root string) error {
	data, err := atomicfs.ReadFile(templatePath)
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

// bundleDirs returns the bundle directories a template references, joined
// to Root.
func (c Catalogs) bundleDirs(templatePath string) ([]string, error) {
	data, err := atomicfs.ReadFile(templatePath)
	if err != nil {
		return nil, fmt.Errorf("read semver template: %w", err)
	}
	t, err := ParseTemplate(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", templatePath, err)
	}
	var dirs []string
	for _, ref := range t.Refs() {
		dir := ref
		if !filepath.IsAbs(dir) && c.Root != "" {
			dir = filepath.Join(c.Root, dir)
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

// checkOwn refuses to replace OutDir/<pkg>/catalog.yaml unless it is absent
// or the catalog of package pkg: bundlegen overwrites only its own files.
func (c Catalogs) checkOwn(pkg string) error {
	path := filepath.Join(c.OutDir, pkg, CatalogFile)
	data, err := atomicfs.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	cfg, err := declcfg.LoadReader(bytes.NewReader(data))
	if err == nil && len(cfg.Packages) == 1 && cfg.Packages[0].Name == pkg {
		return nil
	}
	return fmt.Errorf("%s exists and is not the catalog of package %q that bundlegen writes there: it never overwrites other files; move it away or choose another --output", path, pkg)
}

// validate checks the catalog folder OutDir would be with rendered written
// into it, as validate catalog will read it: a copy of OutDir's files with
// the new catalogs, in a private folder outside the tree (messages name
// OutDir).
func (c Catalogs) validate(ctx context.Context, rendered map[string][]byte) error {
	view, err := os.MkdirTemp("", "bundlegen-catalog-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(view)
	if _, err := os.Lstat(c.OutDir); err == nil {
		src := atomicfs.FS(c.OutDir)
		err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(view, filepath.FromSlash(p)), 0o755)
			}
			data, err := fs.ReadFile(src, p)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(view, filepath.FromSlash(p)), data, 0o644)
		})
		if err != nil {
			return err
		}
	}
	for name, data := range rendered {
		if err := os.MkdirAll(filepath.Join(view, name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(view, name, CatalogFile), data, 0o644); err != nil {
			return err
		}
	}
	findings, err := validate.Catalog{Dir: view}.Run(ctx)
	if err != nil {
		return fmt.Errorf("the new catalog does not load; %s is unchanged: %s", c.OutDir, strings.ReplaceAll(err.Error(), view, c.OutDir))
	}
	if len(findings) > 0 {
		lines := make([]string, 0, len(findings))
		for _, f := range findings {
			lines = append(lines, "  "+f.String())
		}
		return fmt.Errorf("the rendered catalog does not validate; %s is unchanged:\n%s", c.OutDir, strings.Join(lines, "\n"))
	}
	if c.CheckCatalog != nil {
		if err := c.CheckCatalog(ctx, view); err != nil {
			return fmt.Errorf("%s; %s is unchanged", strings.ReplaceAll(err.Error(), view, c.OutDir), c.OutDir)
		}
	}
	return nil
}
