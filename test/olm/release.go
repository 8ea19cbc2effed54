package olm

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/internal/release"
)

// Release makes a test release repository with the release tools themselves:
// bundles of the given versions of both packages (bundle.Generate over the
// repository's operator/config, one release file per version made from the
// repository's newest one) and the catalog the semver template renders over
// them (fbc.Catalogs), with the repository's release extras.
type Release struct {
	// Root is the repository root (operator/config, channels/).
	Root string
	// Dir receives bundle/, channels/ and catalog/.
	Dir string
	// Versions lists the bundle versions of each package, e.g.
	// {"inferencestack-operator": {"1.0.0", "1.1.0"}}; a version generates
	// bundles of both packages, only the listed ones go into the catalog.
	// Nil means the repository's own releases: its release files and channel
	// templates as they are, so Run makes the repository's bundles and
	// catalog again (what `make release` writes), with Digests applied.
	Versions map[string][]string
	// Deprecations, by package, replace the deprecations of the
	// repository's release extras (channels/<package>.release.yaml).
	Deprecations map[string]fbc.Deprecations
	// NoBridges drops the cross-major bridges of the repository's release
	// extras. Without it, a bridge to a version the test release does not
	// list is dropped (the others are kept).
	NoBridges bool
	// Digests override the repository's image digest lock
	// ("registry/repository:tag" -> "sha256:..."), such as the digest of an
	// operator image a test built, which the bundles then name.
	Digests map[string]string
	// Edit, when set, changes every release input (channels/releases/
	// <version>.yaml) before its bundles are made: a test pins stand-in
	// operand images this way (their digests go into Digests).
	Edit func(in *release.Input)
	// Fixtures add test-only releases to the repository's (with Versions
	// nil), never releases: each new operator version ("5.0.0") is the
	// release input of a released one ("4.0.0") with only its version (and
	// its operator image's tag) changed, listed after it in the operator's
	// channel template: another major of the same line, for the tests of a
	// hand-over between majors. Its CRD package bundle is dropped (the
	// catalog's CRD releases are the repository's).
	Fixtures map[string]string
	// Log receives the tools' warnings; nil discards them.
	Log io.Writer
}

// Run generates the bundles and the catalog and returns Dir's catalog folder.
func (r Release) Run(ctx context.Context) (string, error) {
	log := r.Log
	if log == nil {
		log = io.Discard
	}
	releases := filepath.Join(r.Dir, "channels", "releases")
	if err := os.MkdirAll(releases, 0o755); err != nil {
		return "", err
	}
	rbacDir, err := r.rbacDir()
	if err != nil {
		return "", err
	}
	lockPath, err := r.lock(ctx)
	if err != nil {
		return "", err
	}
	if r.Versions == nil {
		return r.repositoryReleases(ctx, releases, lockPath, rbacDir)
	}
	if len(r.Fixtures) > 0 {
		return "", fmt.Errorf("Release.Fixtures %v: fixtures are added to the repository's releases (Versions nil), not to Versions %v", r.Fixtures, r.Versions)
	}
	base, err := newestRelease(filepath.Join(r.Root, "channels", "releases"))
	if err != nil {
		return "", err
	}
	var all []string
	for _, vs := range r.Versions {
		all = append(all, vs...)
	}
	slices.SortFunc(all, func(a, b string) int { return semver.MustParse(a).Compare(semver.MustParse(b)) })
	all = slices.Compact(all)
	for _, v := range all {
		// The lowest major takes unlabelled stacks, as in the repository's releases.
		takes := semver.MustParse(v).Major == semver.MustParse(all[0]).Major
		if err := r.write(filepath.Join(releases, v+".yaml"), releaseFile(base, v, takes)); err != nil {
			return "", err
		}
	}
	{
		// One run writes the bundles of every version, in one step.
		_, err := bundle.Generate{
			ReleasesDir: releases,
			LockPath:    lockPath,
			CRDDir:      filepath.Join(r.Root, "operator", "config", "crd", "bases"),
			RBACDir:     rbacDir,
			ManagerPath: filepath.Join(r.Root, "operator", "config", "manager", "manager.yaml"),
			SamplesDir:  filepath.Join(r.Root, "operator", "config", "samples"),
			BasesDir:    filepath.Join(r.Root, "operator", "config", "manifests", "bases"),
			OutputDir:   filepath.Join(r.Dir, "bundle"),
			// The test versions' operator images are not in the digest lock.
			AllowTags: true,
			Warnings:  log,
		}.Run(ctx)
		if err != nil {
			return "", fmt.Errorf("generating the test bundles of %v: %w", all, err)
		}
	}
	// A version makes bundles of both packages; drop those the package does
	// not list (all of a package Versions leaves out, which is then not in
	// the catalog), which the catalog would refuse to leave out.
	for _, pkg := range []string{bundle.PackageCRDs, bundle.PackageOperator} {
		if _, listed := r.Versions[pkg]; !listed {
			if err := os.RemoveAll(filepath.Join(r.Dir, "bundle", pkg)); err != nil {
				return "", err
			}
			continue
		}
		for _, v := range all {
			if !slices.Contains(r.Versions[pkg], v) {
				if err := os.RemoveAll(filepath.Join(r.Dir, "bundle", pkg, v)); err != nil {
					return "", err
				}
			}
		}
	}
	channels := filepath.Join(r.Dir, "channels")
	for pkg, versions := range r.Versions {
		t := fbc.Template{Schema: "olm.semver", GenerateMajorChannels: true}
		for _, v := range versions {
			t.Stable.Bundles = append(t.Stable.Bundles, fbc.TemplateBundle{Image: filepath.Join("bundle", pkg, v)})
		}
		data, err := t.Marshal()
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(channels, pkg+fbc.TemplateSuffix), data, 0o644); err != nil {
			return "", err
		}
		extrasPath := fbc.ReleasePath(filepath.Join(r.Root, "channels", pkg+fbc.TemplateSuffix))
		extras, err := os.ReadFile(extrasPath)
		if err != nil {
			return "", err
		}
		rel, err := fbc.ParseRelease(extrasPath, extras)
		if err != nil {
			return "", err
		}
		missing := slices.ContainsFunc(rel.Bridges, func(b fbc.Bridge) bool { return !slices.Contains(versions, b.Bundle) })
		if d, ok := r.Deprecations[pkg]; ok || r.NoBridges || missing {
			if ok {
				rel.Deprecations = d
			}
			rel.Bridges = slices.DeleteFunc(rel.Bridges, func(b fbc.Bridge) bool { return r.NoBridges || !slices.Contains(versions, b.Bundle) })
			if extras, err = yaml.Marshal(rel); err != nil {
				return "", err
			}
		}
		if err := os.WriteFile(fbc.ReleasePath(filepath.Join(channels, pkg+fbc.TemplateSuffix)), extras, 0o644); err != nil {
			return "", err
		}
	}
	catalog := filepath.Join(r.Dir, "catalog")
	if _, err := (fbc.Catalogs{ChannelsDir: channels, Root: r.Dir, OutDir: catalog}).Run(ctx); err != nil {
		return "", fmt.Errorf("rendering the test catalog: %w", err)
	}
	return catalog, nil
}

// write writes the release input data to path, changed by Edit.
func (r Release) write(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o644); err != nil || r.Edit == nil {
		return err
	}
	in, err := release.LoadInput(path)
	if err != nil {
		return err
	}
	r.Edit(&in)
	if data, err = yaml.Marshal(in); err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("# A test release input: "+filepath.Base(path)+" changed by the test (olm.Release.Edit).\n"), data...), 0o644)
}

// lock returns the image digest lock to generate with: the repository's,
// or, with Digests, a copy of it in Dir with Digests applied.
func (r Release) lock(ctx context.Context) (string, error) {
	path := filepath.Join(r.Root, "channels", "images.lock")
	if len(r.Digests) == 0 {
		return path, nil
	}
	lock, err := release.LoadLock(path)
	if err != nil {
		return "", err
	}
	maps.Copy(lock.Images, r.Digests)
	path = filepath.Join(r.Dir, "channels", "images.lock")
	return path, lock.Write(ctx, path)
}

// repositoryReleases generates the bundles of every release file of the
// repository and its catalog from its channel templates, into Dir.
func (r Release) repositoryReleases(ctx context.Context, releases, lockPath, rbacDir string) (string, error) {
	channels := filepath.Join(r.Root, "channels")
	files, err := filepath.Glob(filepath.Join(channels, "releases", "*.yaml"))
	if err != nil {
		return "", err
	}
	templates, err := filepath.Glob(filepath.Join(channels, "*"+fbc.TemplateSuffix))
	if err != nil {
		return "", err
	}
	for _, t := range templates {
		files = append(files, t)
		if _, err := os.Stat(fbc.ReleasePath(t)); err == nil {
			files = append(files, fbc.ReleasePath(t))
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, err := filepath.Rel(channels, f)
		if err != nil {
			return "", err
		}
		switch {
		case filepath.Dir(rel) == "releases":
			err = r.write(filepath.Join(r.Dir, "channels", rel), data)
		case rel == bundle.PackageOperator+fbc.TemplateSuffix && len(r.Fixtures) > 0:
			next := map[string]string{}
			for to, from := range r.Fixtures {
				next[from] = to
			}
			if data, err = listNext(f, data, next); err == nil {
				err = os.WriteFile(filepath.Join(r.Dir, "channels", rel), data, 0o644)
			}
		default:
			err = os.WriteFile(filepath.Join(r.Dir, "channels", rel), data, 0o644)
		}
		if err != nil {
			return "", err
		}
	}
	for to, from := range r.Fixtures {
		if _, err := os.Stat(filepath.Join(channels, "releases", to+".yaml")); err == nil {
			return "", fmt.Errorf("Release.Fixtures: %s is released already", to)
		}
		base, err := os.ReadFile(filepath.Join(channels, "releases", from+".yaml"))
		if err != nil {
			return "", fmt.Errorf("Release.Fixtures: %s from %s: %w", to, from, err)
		}
		if err := r.write(filepath.Join(releases, to+".yaml"), releaseFile(base, to, false)); err != nil {
			return "", err
		}
	}
	// One run writes the bundles of every release, in one step.
	if _, err := (bundle.Generate{
		ReleasesDir: releases,
		LockPath:    lockPath,
		SumPath:     filepath.Join(r.Dir, "channels", "published.sum"),
		CRDDir:      filepath.Join(r.Root, "operator", "config", "crd", "bases"),
		RBACDir:     rbacDir,
		ManagerPath: filepath.Join(r.Root, "operator", "config", "manager", "manager.yaml"),
		SamplesDir:  filepath.Join(r.Root, "operator", "config", "samples"),
		BasesDir:    filepath.Join(r.Root, "operator", "config", "manifests", "bases"),
		OutputDir:   filepath.Join(r.Dir, "bundle"),
		Warnings:    r.Log,
	}).Run(ctx); err != nil {
		return "", fmt.Errorf("generating the bundles of the repository's releases: %w", err)
	}
	for to := range r.Fixtures {
		if err := os.RemoveAll(filepath.Join(r.Dir, "bundle", bundle.PackageCRDs, to)); err != nil {
			return "", err
		}
	}
	catalog := filepath.Join(r.Dir, "catalog")
	if _, err := (fbc.Catalogs{ChannelsDir: filepath.Join(r.Dir, "channels"), Root: r.Dir, OutDir: catalog}).Run(ctx); err != nil {
		return "", fmt.Errorf("rendering the catalog: %w", err)
	}
	return catalog, nil
}

// rbacDir is operator/config/rbac, or, while the operator's generated
// ClusterRole (role.yaml, from the controller's RBAC markers) does not exist
// yet, a copy of it with a stand-in role.yaml so bundles can be generated.
func (r Release) rbacDir() (string, error) {
	dir := filepath.Join(r.Root, "operator", "config", "rbac")
	if _, err := os.Stat(filepath.Join(dir, "role.yaml")); err == nil {
		return dir, nil
	}
	tmp := filepath.Join(r.Dir, "rbac")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	return tmp, os.WriteFile(filepath.Join(tmp, "role.yaml"), []byte(standInRole), 0o644)
}

const standInRole = `# Stand-in written by test/olm while operator/config/rbac/role.yaml (generated
# from the controller's RBAC markers) does not exist.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: inferencestack-operator
rules:
- apiGroups: [inferencestack.io]
  resources: [inferencestacks, inferencestacks/status, inferencestacks/finalizers]
  verbs: [get, list, watch, update, patch]
`

func newestRelease(dir string) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no release file <version>.yaml in %s", dir)
	}
	var newest string
	var newestV semver.Version
	for _, f := range files {
		v, err := semver.Parse(strings.TrimSuffix(filepath.Base(f), ".yaml"))
		if err != nil {
			continue
		}
		if newest == "" || v.GT(newestV) {
			newest, newestV = f, v
		}
	}
	return os.ReadFile(newest)
}

var (
	versionLine  = regexp.MustCompile(`(?m)^version: .*$`)
	operatorLine = regexp.MustCompile(`(?m)^(operatorImage: [^:\s]+):.*$`)
	takesLine    = regexp.MustCompile(`(?m)^takesUnlabeledStacks: .*\n`)
	// A test release is never published (frozen), whatever the base says.
	publishedLine = regexp.MustCompile(`(?m)^published: .*\n`)
)

// releaseFile is base with its version and operator image tag set to v,
// takesUnlabeledStacks set to takes, and not published.
func releaseFile(base []byte, v string, takes bool) []byte {
	out := versionLine.ReplaceAll(base, []byte("version: "+v))
	out = takesLine.ReplaceAll(out, nil)
	out = publishedLine.ReplaceAll(out, nil)
	if !takes {
		out = append(out, "takesUnlabeledStacks: false\n"...)
	}
	return operatorLine.ReplaceAll(out, []byte("${1}:v"+v))
}

// PushRelease pushes, to the cluster's registry, every bundle under
// dir/bundle at the reference the catalog names once redirected
// (<registry>/inferencestack/<package>-bundle:v<version>, see
// RedirectedPrefix), and the catalog folder catalogDir as
// <registry>/inferencestack/<catalogRepo>:latest; signs each with the run's
// key, its SBOM and provenance attached (Signing), and verifies them all.
// It returns the catalog's reference as a ClusterCatalog names it (under
// RedirectedPrefix).
func (c *Cluster) PushRelease(ctx context.Context, bundleRoot, catalogDir, catalogRepo string) (string, error) {
	dirs, err := filepath.Glob(filepath.Join(bundleRoot, "*", "*"))
	if err != nil {
		return "", err
	}
	var pushed []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "metadata", "annotations.yaml")); err != nil {
			continue
		}
		img, err := image.BuildBundle(d)
		if err != nil {
			return "", err
		}
		pkg, version := filepath.Base(filepath.Dir(d)), filepath.Base(d)
		ref := fmt.Sprintf("%s/inferencestack/%s-bundle:v%s", c.Registry, pkg, version)
		if _, err := image.Push(ctx, img, ref); err != nil {
			return "", err
		}
		if err := c.Signing.Sign(ctx, image.KindBundle, d, ref); err != nil {
			return "", err
		}
		pushed = append(pushed, ref)
	}
	img, err := image.BuildCatalog(catalogDir, image.CatalogOptions{})
	if err != nil {
		return "", err
	}
	ref := fmt.Sprintf("%s/inferencestack/%s:latest", c.Registry, catalogRepo)
	if _, err := image.Push(ctx, img, ref); err != nil {
		return "", err
	}
	if err := c.Signing.Sign(ctx, image.KindCatalog, catalogDir, ref); err != nil {
		return "", err
	}
	// Verified before any ClusterCatalog names them, as an admission
	// policy would before a pull.
	for _, ref := range append(pushed, ref) {
		if err := c.Signing.Verify(ctx, ref); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%s/%s:latest", RedirectedPrefix, catalogRepo), nil
}
