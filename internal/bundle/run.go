package bundle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/internal/validate"
)

// Packages are the packages of every release, in the order bundles are reported.
var Packages = []string{PackageCRDs, PackageOperator}

// Generate makes, checks and writes the bundles of the releases in
// ReleasesDir. Every release is checked on every run: the bundles of a
// published release must hash as recorded in the published sum, those of
// the others must be byte for byte what their inputs generate now.
type Generate struct {
	// ReleasesDir holds channels/releases/<version>.yaml.
	ReleasesDir string
	// LockPath is the image digest lock.
	LockPath string
	// SumPath is the published sum (channels/published.sum).
	SumPath string
	// Version limits writing to one release; empty writes the missing
	// bundles of every release. Every release is checked either way.
	Version string
	// CRDDir holds the generated CRDs.
	CRDDir string
	// RBACDir holds role.yaml and the bindings.
	RBACDir string
	// ManagerPath is the manager Deployment manifest.
	ManagerPath string
	// SamplesDir holds the samples for alm-examples.
	SamplesDir string
	// BasesDir holds the base CSVs, <package>.clusterserviceversion.yaml.
	BasesDir string
	// OutputDir is the bundle/ root.
	OutputDir string
	// AllowTags lets images the lock does not list through, by tag.
	AllowTags bool
	// Check compares instead of writing: it fails when a bundle is missing
	// or differs, or a published release is not yet frozen.
	Check bool
	// Regenerate rewrites the bundles of unpublished releases that differ
	// from what their inputs generate. Published releases never change.
	Regenerate bool
	// Publish records this release in the published sum: its input must say
	// published: true and its bundles must be exactly what its inputs
	// generate. Nothing else is written. Without it a published release
	// missing from the sum is an error (tampering, or a publication not yet
	// recorded), never recorded quietly.
	Publish string
	// Warnings receives warnings; nil discards.
	Warnings io.Writer
	// DefaultOutput says OutputDir is the repository's bundle/ (the flag's
	// default), not a path the user typed: the checks against typos such as
	// `--output .` do not apply to it.
	DefaultOutput bool
}

// States of a bundle in a Result.
const (
	StateWritten     = "written"
	StateRegenerated = "regenerated"
	StateUnchanged   = "unchanged"
	StateUpToDate    = "up to date"
	StateFrozen      = "published, unchanged"
)

// Bundle is one bundle of a release and what the run did with it.
type Bundle struct {
	// Package is the OLM package (PackageCRDs or PackageOperator).
	Package string `json:"package"`
	// Version is the release.
	Version string `json:"version"`
	// Dir is the bundle directory.
	Dir string `json:"dir"`
	// State is one of the State constants.
	State string `json:"state"`
	// Published says the release is frozen (published sum).
	Published bool `json:"published"`
}

// Result says what happened to each bundle.
type Result struct {
	// Bundles of every release, by version then package.
	Bundles []Bundle
	// Frozen lists the releases this run recorded in the published sum.
	Frozen []string
	// Reports are the validation reports of the bundles of unpublished
	// releases (published ones were validated before they froze).
	Reports []validate.Report
}

// Files is a bundle's content: path relative to the bundle directory -> bytes.
type Files map[string][]byte

// plan is what Verify found for one release.
type plan struct {
	in      release.Input
	frozen  bool
	bundles map[string]Files // nil when frozen
	state   map[string]string
	// freeze says the release is published but not yet in the sum.
	freeze bool
}

// Verify checks every release's bundles against their inputs without
// writing or validating anything, and returns them (state StateUpToDate or
// StateFrozen). It is what catalog relies on.
func (g Generate) Verify(ctx context.Context) ([]Bundle, error) {
	g.Check = true
	if err := atomicfs.Pending(g.OutputDir, "bundle"); err != nil {
		return nil, err
	}
	plans, err := g.plan(ctx)
	if err != nil {
		return nil, err
	}
	return bundles(g.OutputDir, plans), nil
}

// Run checks every release, then writes the bundles that are missing (of
// Version only, when set) or, with Regenerate, stale, and records newly
// published releases in the published sum, all in one transaction
// (atomicfs.Tx): either every bundle file and the sum are written or none.
// Only those files are written; every other file of bundle/ stays.
func (g Generate) Run(ctx context.Context) (Result, error) {
	if g.Publish != "" && (g.Check || g.Regenerate) {
		return Result{}, fmt.Errorf("--publish %s records a release and writes nothing else: it cannot go with --check or --regenerate", g.Publish)
	}
	if g.Check {
		// Nothing is written: no output checks, but a half-written tree is
		// not checked either.
		if err := atomicfs.Pending(g.OutputDir, "bundle"); err != nil {
			return Result{}, err
		}
	} else {
		if err := (atomicfs.Output{Flag: "--output", Path: g.OutputDir, Default: g.DefaultOutput, Owns: []string{"bundle"},
			Inputs: []string{g.ReleasesDir, g.LockPath, g.SumPath, g.CRDDir, g.RBACDir, g.SamplesDir, g.BasesDir, g.ManagerPath}}).Check(); err != nil {
			return Result{}, err
		}
		// A stopped run is finished or undone before anything is read.
		if err := atomicfs.Recover(g.OutputDir); err != nil {
			return Result{}, err
		}
	}
	plans, err := g.plan(ctx)
	if err != nil {
		return Result{}, err
	}
	res := Result{Bundles: bundles(g.OutputDir, plans)}
	var writes []Bundle
	for _, b := range res.Bundles {
		if b.State == StateWritten || b.State == StateRegenerated {
			writes = append(writes, b)
		}
	}
	planOf := func(b Bundle) plan {
		return plans[slices.IndexFunc(plans, func(p plan) bool { return p.in.Version == b.Version })]
	}
	validateIn := func(root string, b Bundle) error {
		rbac := ""
		if b.Package == PackageOperator {
			rbac = g.RBACDir
		}
		rep, err := validate.Bundle{Dir: filepath.Join(root, b.Package, b.Version), RBACDir: rbac, KubeVersion: planOf(b).in.MinKubeVersion}.Run(ctx)
		if err != nil {
			return err
		}
		rep.Dir = b.Dir
		res.Reports = append(res.Reports, rep)
		if rep.HasErrors() {
			var s strings.Builder
			rep.Print(&s)
			return fmt.Errorf("the generated %s bundle of %s does not validate; %s is unchanged:\n%s", b.Package, b.Version, g.OutputDir, s.String())
		}
		return nil
	}
	for _, b := range res.Bundles {
		if b.Published || slices.Contains(writes, b) {
			continue
		}
		if err := validateIn(g.OutputDir, b); err != nil {
			return res, err
		}
	}
	if g.Publish != "" && len(writes) > 0 {
		var dirs []string
		for _, b := range writes {
			dirs = append(dirs, b.Dir)
		}
		return res, fmt.Errorf("--publish %s records the release and writes nothing else, but %s would be written: run `bundlegen bundle` first, commit, then publish",
			g.Publish, strings.Join(dirs, ", "))
	}
	sum, frozen, err := g.freeze(plans)
	if err != nil {
		return res, err
	}
	if len(writes) == 0 && len(frozen) == 0 {
		return res, nil
	}
	// The new bundles are validated where they are written first: a
	// private folder outside the tree.
	scratch, err := os.MkdirTemp("", "bundlegen-validate-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(scratch)
	for _, b := range writes {
		if err := write(filepath.Join(scratch, b.Package, b.Version), planOf(b).bundles[b.Package]); err != nil {
			return res, err
		}
		if err := validateIn(scratch, b); err != nil {
			return res, err
		}
	}
	tx, err := atomicfs.Begin(ctx, g.OutputDir)
	if err != nil {
		return res, err
	}
	defer tx.Close()
	for _, b := range writes {
		files := planOf(b).bundles[b.Package]
		for _, name := range slices.Sorted(maps.Keys(files)) {
			tx.Write(filepath.Join(b.Dir, filepath.FromSlash(name)), files[name])
		}
	}
	if len(frozen) > 0 {
		tx.Write(g.SumPath, sum)
	}
	if err := tx.Commit(); err != nil {
		if len(frozen) > 0 {
			return res, fmt.Errorf("recording release %s in %s: %w; nothing was written, and until the sum records it every bundlegen verb refuses the release "+
				"(its input says published: true): fix the cause, then run `bundlegen bundle --publish %s` again", strings.Join(frozen, ", "), g.SumPath, err, strings.Join(frozen, ", "))
		}
		return res, fmt.Errorf("%w; %s is unchanged", err, g.OutputDir)
	}
	res.Frozen = frozen
	for i := range res.Bundles {
		if slices.Contains(res.Frozen, res.Bundles[i].Version) {
			res.Bundles[i].Published = true
		}
	}
	return res, nil
}

// bundles lists the plans' bundles, by version then package.
func bundles(root string, plans []plan) []Bundle {
	var out []Bundle
	for _, p := range plans {
		for _, pkg := range Packages {
			out = append(out, Bundle{Package: pkg, Version: p.in.Version, Dir: filepath.Join(root, pkg, p.in.Version),
				State: p.state[pkg], Published: p.frozen})
		}
	}
	return out
}

// plan loads every release input and compares each release's bundles with
// their inputs (or, for a frozen release, with the published sum).
func (g Generate) plan(ctx context.Context) ([]plan, error) {
	// No link out of the tree and nothing that blocks when opened, before
	// anything is read.
	if _, err := os.Lstat(g.OutputDir); err == nil {
		if err := atomicfs.CheckTree(g.OutputDir); err != nil {
			return nil, err
		}
	}
	versions, err := release.Versions(g.ReleasesDir)
	if err != nil {
		return nil, err
	}
	if g.Version != "" && !slices.ContainsFunc(versions, func(v semver.Version) bool { return v.String() == g.Version }) {
		return nil, fmt.Errorf("release %s: %s does not exist: create it (see docs/release.md)", g.Version, filepath.Join(g.ReleasesDir, g.Version+".yaml"))
	}
	if g.Publish != "" && !slices.ContainsFunc(versions, func(v semver.Version) bool { return v.String() == g.Publish }) {
		return nil, fmt.Errorf("--publish %s: %s does not exist: give the version of a release input that says published: true",
			g.Publish, filepath.Join(g.ReleasesDir, g.Publish+".yaml"))
	}
	if err := release.CheckUnlabeledOwner(g.ReleasesDir); err != nil {
		return nil, err
	}
	lock, err := release.LoadLock(g.LockPath)
	if err != nil {
		return nil, err
	}
	sum, err := release.LoadSum(g.SumPath)
	if err != nil {
		return nil, err
	}
	for v := range sum.Releases {
		if !slices.ContainsFunc(versions, func(x semver.Version) bool { return x.String() == v }) {
			gone := filepath.Join(g.ReleasesDir, v+".yaml")
			moved, same := g.renamedInput(v, sum)
			switch {
			case moved != "" && same:
				return nil, fmt.Errorf("release %s is published (%s) but its input %s is gone, and %s holds exactly its content: the input was renamed; "+
					"a published release never changes: rename it back (git mv %s %s)",
					v, g.SumPath, gone, moved, moved, gone)
			case moved != "":
				return nil, fmt.Errorf("release %s is published (%s) but its input %s is gone, and %s looks like it renamed and changed "+
					"(it says version: %s, or published: true for a release the sum does not record): a published release never changes; "+
					"restore %s from git (git checkout HEAD -- %s) and give a new release an input of its own, without published: true until its images are pushed",
					v, g.SumPath, gone, moved, v, gone, gone)
			}
			return nil, fmt.Errorf("release %s is published (%s) but its input %s is gone: a published release never changes; restore it from git",
				v, g.SumPath, gone)
		}
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("no release inputs (<version>.yaml) in %s: add one, see docs/release.md", g.ReleasesDir)
	}
	if err := g.checkOrphans(versions); err != nil {
		return nil, err
	}
	var plans []plan
	for _, v := range versions {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		in, err := release.LoadInput(filepath.Join(g.ReleasesDir, v.String()+".yaml"))
		if err != nil {
			return nil, err
		}
		p := plan{in: in, state: map[string]string{}}
		if g.Publish == in.Version && sum.Frozen(in.Version) {
			return nil, fmt.Errorf("--publish %s: release %s is already recorded in %s; nothing to do", g.Publish, in.Version, g.SumPath)
		}
		if g.Publish == in.Version && !in.Published {
			return nil, fmt.Errorf("--publish %s: release input %s does not say published: true: set it once the release's images are pushed, then record it", g.Publish, in.Path)
		}
		if in.Published && !sum.Frozen(in.Version) && g.Publish != in.Version {
			// published: true is the freeze on its own: a published release
			// missing from the sum is never written nor recorded quietly.
			if others := g.unrecorded(versions, sum); len(others) > 1 {
				// Each would tell to publish the other first: say how to
				// record them one after the other.
				return nil, fmt.Errorf("releases %s all say published: true, but %s records none of them, and `bundlegen bundle --publish` records one release per run while refusing every other unrecorded one: "+
					"keep published: true in one input only (%s), record it with `bundlegen bundle --publish %s`, then set published: true in the next and record it, one at a time; "+
					"if their lines were removed from %s, that is tampering: restore the file from git (git checkout -- %s)",
					strings.Join(others, ", "), g.SumPath, filepath.Join(g.ReleasesDir, others[0]+".yaml"), others[0], g.SumPath, g.SumPath)
			}
			return nil, fmt.Errorf("release input %s says published: true, but %s has no line for release %s, so nothing records what was published: "+
				"if you are publishing %s now, record it with `bundlegen bundle --publish %s` (make bundle PUBLISH=%s), which writes only the sum and only when its bundles are what its inputs generate; "+
				"if its lines were removed from %s, that is tampering: restore the file from git (git checkout -- %s). A published release is never regenerated",
				in.Path, g.SumPath, in.Version, in.Version, in.Version, in.Version, g.SumPath, g.SumPath)
		}
		if sum.Frozen(in.Version) {
			if err := g.checkFrozen(in, sum.Releases[in.Version]); err != nil {
				return nil, err
			}
			if err := g.checkFrozenImages(in, lock); err != nil {
				return nil, err
			}
			p.frozen = true
			for _, pkg := range Packages {
				p.state[pkg] = StateFrozen
			}
			plans = append(plans, p)
			continue
		}
		images, err := release.PinImages(in, lock, g.AllowTags)
		if err != nil {
			return nil, err
		}
		// Unresolved images are reported by the validation of each bundle,
		// naming the fields; these the lock does not even list.
		for _, w := range images.Unlisted {
			fmt.Fprintln(g.warnings(), w)
		}
		if p.bundles, err = g.Build(in, images); err != nil {
			return nil, err
		}
		p.freeze = in.Published
		for _, pkg := range Packages {
			if p.state[pkg], err = g.bundleState(in, pkg, p.bundles[pkg]); err != nil {
				return nil, err
			}
			if p.freeze && p.state[pkg] != StateUnchanged && p.state[pkg] != StateUpToDate {
				return nil, fmt.Errorf("--publish %s: %s is not what its inputs generate (it would be %s), and a release that says published: true is never written: "+
					"set published: false in %s, generate its bundles (`bundlegen bundle --regenerate`), check and push them, then set published: true again and record it",
					in.Version, filepath.Join(g.OutputDir, pkg, in.Version), p.state[pkg], in.Path)
			}
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// renamedInput looks under ReleasesDir (subfolders too) for where the
// input of the published release version went: a file whose content has
// the sum's hash of it (same: renamed), or else one that was renamed and
// changed: it says version: <version> under another name, or says
// published: true for a release the sum does not record. "" when none.
func (g Generate) renamedInput(version string, sum release.Sum) (path string, same bool) {
	hash := sum.Releases[version][release.SumInput]
	var files []string
	_ = filepath.WalkDir(g.ReleasesDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	var changed string
	for _, p := range files {
		data, err := atomicfs.ReadFileLimit(p, 1<<20)
		if err != nil {
			continue
		}
		if hash != "" && release.Hash(data) == hash {
			return p, true
		}
		var in struct {
			Version   string `json:"version"`
			Published bool   `json:"published"`
		}
		if changed == "" && yaml.Unmarshal(data, &in) == nil &&
			((in.Version == version && filepath.Base(p) != version+".yaml") || (in.Published && !sum.Frozen(in.Version))) {
			changed = p
		}
	}
	return changed, false
}

// unrecorded lists the releases whose input says published: true and which
// the sum does not record, lowest first.
func (g Generate) unrecorded(versions []semver.Version, sum release.Sum) []string {
	var out []string
	for _, v := range versions {
		in, err := release.LoadInput(filepath.Join(g.ReleasesDir, v.String()+".yaml"))
		if err == nil && in.Published && !sum.Frozen(in.Version) {
			out = append(out, in.Version)
		}
	}
	return out
}

// checkOrphans fails on a bundle directory bundle/<package>/<version> whose
// release has no input: nothing would check it, yet the catalog could list it.
func (g Generate) checkOrphans(versions []semver.Version) error {
	var orphans []string
	for _, pkg := range Packages {
		entries, err := os.ReadDir(filepath.Join(g.OutputDir, pkg))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("bundle tree %s: %w", g.OutputDir, err)
		}
		for _, e := range entries {
			if _, err := semver.Parse(e.Name()); err != nil || !e.IsDir() ||
				slices.ContainsFunc(versions, func(v semver.Version) bool { return v.String() == e.Name() }) {
				continue
			}
			orphans = append(orphans, filepath.Join(g.OutputDir, pkg, e.Name()))
		}
	}
	if len(orphans) > 0 {
		return fmt.Errorf("%s: no release input in %s makes these bundles (%s is missing?): nothing checks them, yet a template could list them; "+
			"restore the release input from git, or, if the release was never published, remove the bundles (git rm -r %s) and their lines in channels/<package>.semver.yaml",
			strings.Join(orphans, ", "), g.ReleasesDir, filepath.Join(g.ReleasesDir, filepath.Base(orphans[0])+".yaml"), strings.Join(orphans, " "))
	}
	return nil
}

// bundleState compares one bundle directory with what the release's inputs
// generate and says what to do with it; a difference it may not repair is an
// error naming the files.
func (g Generate) bundleState(in release.Input, pkg string, files Files) (string, error) {
	dir := filepath.Join(g.OutputDir, pkg, in.Version)
	same, exists, diff, err := compare(dir, files)
	switch {
	case err != nil:
		return "", err
	case same && g.Check:
		return StateUpToDate, nil
	case same:
		return StateUnchanged, nil
	case exists && in.Published:
		return "", fmt.Errorf("%s differs from what its inputs (%s, the image lock, operator/config) generate (%s), and %s says published: true: a published release is never written. "+
			"Restore the bundle and its input from git; a change ships in channels/releases/<next version>.yaml (see docs/release.md)", dir, in.Path, diff, in.Path)
	case exists && g.Regenerate && !g.Check:
		if extra := extraFiles(diff); len(extra) > 0 {
			return "", fmt.Errorf("%s holds files bundlegen does not generate (%s): it writes only its own files; move them elsewhere, then regenerate",
				dir, strings.Join(extra, ", "))
		}
		return StateRegenerated, nil
	case exists:
		return "", fmt.Errorf("%s differs from what its inputs (%s, the image lock, operator/config) generate (%s): a release's bundles never change on their own. "+
			"If %s was published, restore the bundle and its inputs from git and put the change in channels/releases/<next version>.yaml (see docs/release.md); "+
			"if it was not, regenerate it with `bundlegen bundle --regenerate` (make release REGENERATE=1)", dir, in.Path, diff, in.Version)
	case g.Check:
		return "", fmt.Errorf("%s does not exist: run `make bundle` to generate release %s", dir, in.Version)
	case g.Version != "" && g.Version != in.Version:
		return "", fmt.Errorf("%s does not exist: run `bundlegen bundle` without --version (or with --version %s) to generate release %s", dir, in.Version, in.Version)
	}
	return StateWritten, nil
}

func extraFiles(diff string) []string {
	var out []string
	for _, d := range strings.Split(diff, ", ") {
		if name, ok := strings.CutSuffix(d, " extra"); ok {
			out = append(out, name)
		}
	}
	return out
}

// checkFrozen compares a published release's input and bundle files with
// the hashes of the published sum.
func (g Generate) checkFrozen(in release.Input, sums map[string]string) error {
	const restore = "a published release never changes; restore it from git (git checkout -- <file>) and put the change in channels/releases/<next version>.yaml"
	if !in.Published {
		return fmt.Errorf("release input %s: field published: release %s is frozen in %s, so it must say published: true; %s", in.Path, in.Version, g.SumPath, restore)
	}
	data, err := atomicfs.ReadFile(in.Path)
	if err != nil {
		return err
	}
	if release.Hash(data) != sums[release.SumInput] {
		return fmt.Errorf("release input %s changed after release %s was published, or the sum's %s line was edited (its SHA-256 is not the one in %s): %s",
			in.Path, in.Version, release.SumInput, g.SumPath, restore)
	}
	have := map[string]string{}
	for _, pkg := range Packages {
		dir := filepath.Join(g.OutputDir, pkg, in.Version)
		files, err := readFiles(dir)
		if err != nil {
			return fmt.Errorf("bundle %s of published release %s: %w; %s", dir, in.Version, err, restore)
		}
		for name, data := range files {
			have[pkg+"/"+name] = release.Hash(data)
		}
	}
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(sums)) {
		if name == release.SumInput {
			continue
		}
		switch h, ok := have[name]; {
		case !ok:
			diffs = append(diffs, g.sumPath(in.Version, name)+" is missing")
		case h != sums[name]:
			diffs = append(diffs, g.sumPath(in.Version, name)+" changed")
		}
		delete(have, name)
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		diffs = append(diffs, g.sumPath(in.Version, name)+" was added")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("published release %s differs from %s (a bundle file or the sum's line for it was edited): %s; %s", in.Version, g.SumPath, strings.Join(diffs, ", "), restore)
	}
	return nil
}

// sumPath turns a sum name <package>/<path> into the file's path.
func (g Generate) sumPath(version, name string) string {
	pkg, rest, _ := strings.Cut(name, "/")
	return filepath.Join(g.OutputDir, pkg, version, filepath.FromSlash(rest))
}

// freeze returns the published sum with the published releases that are
// not in it yet, and their versions (none: nothing to record).
func (g Generate) freeze(plans []plan) ([]byte, []string, error) {
	var pending []plan
	for _, p := range plans {
		if p.freeze {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return nil, nil, nil
	}
	if g.SumPath == "" {
		return nil, nil, errors.New("no path for the published sum: give --published")
	}
	sum, err := release.LoadSum(g.SumPath)
	if err != nil {
		return nil, nil, err
	}
	var frozen []string
	for _, p := range pending {
		data, err := atomicfs.ReadFile(p.in.Path)
		if err != nil {
			return nil, nil, err
		}
		files := map[string]string{release.SumInput: release.Hash(data)}
		for _, pkg := range Packages {
			for name, data := range p.bundles[pkg] {
				files[pkg+"/"+name] = release.Hash(data)
			}
		}
		sum.Releases[p.in.Version] = files
		frozen = append(frozen, p.in.Version)
	}
	return sum.Marshal(), frozen, nil
}

func write(dir string, files Files) error {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readFiles returns the files under dir by slash-separated relative path.
func readFiles(dir string) (Files, error) {
	have := Files{}
	if err := atomicfs.CheckTree(dir); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := atomicfs.ReadFile(p)
		have[filepath.ToSlash(rel)] = data
		return err
	})
	return have, err
}

// compare reports whether dir holds exactly files; when it exists and does
// not, diff names each difference ("<file> changed|missing|extra").
func compare(dir string, files Files) (same, exists bool, diff string, err error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, false, "", nil
	}
	have, err := readFiles(dir)
	if err != nil {
		return false, true, "", err
	}
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if h, ok := have[name]; !ok {
			diffs = append(diffs, name+" missing")
		} else if !bytes.Equal(h, files[name]) {
			diffs = append(diffs, name+" changed")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if _, ok := files[name]; !ok {
			diffs = append(diffs, name+" extra")
		}
	}
	return len(diffs) == 0, true, strings.Join(diffs, ", "), nil
}

func (g Generate) warnings() io.Writer {
	if g.Warnings == nil {
		return io.Discard
	}
	return g.Warnings
}
