package olm

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/blang/semver/v4"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/validate"
	"github.com/inferencestack/inferencestack/operator/pin"
)

// NextPatches makes a test fixture, never a release: the repository's
// release catalog (its committed bundle/ and channels/) plus, for each
// operator version in From, the next patch version (1.0.0 -> 1.0.1), made
// from that version's committed bundle with only the version changed (the
// CSV's name and version, the operator image's tag, the pin's
// operatorVersion and the version label). The channel templates list each
// new bundle after the one it is made from, and fbc.Catalogs (what
// `bundlegen catalog` runs) renders the catalog, so the semver template
// gives it its edges: in stable-vN and candidate-vN, N.0.1 skips N.0.0.
// The tests use it to upgrade a major with one release within itself.
type NextPatches struct {
	// Root is the repository root (bundle/, channels/).
	Root string
	// Dir receives bundle/, channels/ and catalog/.
	Dir string
	// From lists released operator versions, e.g. {"1.0.0", "3.0.0"}.
	From []string
}

// Fixture is what NextPatches made.
type Fixture struct {
	// BundleRoot is Dir's bundle/ (every bundle of the catalog) and
	// CatalogDir its catalog/.
	BundleRoot, CatalogDir string
	// Added holds only the new bundles (<package>/<version>), to push
	// beside a release already pushed (Cluster.PushRelease).
	Added string
	// Next maps each version of From to its next patch version.
	Next map[string]string
}

// fixtureHeader replaces the generated files' first line, which names the
// release input a fixture bundle does not have.
const fixtureHeader = "# Test fixture (test/olm.NextPatches): bundle/%s/%s with its version set to %s; never released.\n"

// Run copies the release, adds the bundles and renders the catalog.
func (n NextPatches) Run(ctx context.Context) (Fixture, error) {
	f := Fixture{BundleRoot: filepath.Join(n.Dir, "bundle"), CatalogDir: filepath.Join(n.Dir, "catalog"), Added: filepath.Join(n.Dir, "added"), Next: map[string]string{}}
	if err := copyTree(filepath.Join(n.Root, "bundle"), f.BundleRoot); err != nil {
		return Fixture{}, err
	}
	pkgDir := filepath.Join(f.BundleRoot, bundle.PackageOperator)
	for _, from := range n.From {
		v, err := semver.Parse(from)
		if err != nil {
			return Fixture{}, fmt.Errorf("NextPatches.From: %q is not a version: %w", from, err)
		}
		v.Patch++
		next := v.String()
		if _, err := os.Stat(filepath.Join(pkgDir, next)); err == nil {
			return Fixture{}, fmt.Errorf("bundle/%s/%s is released already: make the fixture's next patch of a newer version than %s", bundle.PackageOperator, next, from)
		}
		if err := nextPatch(filepath.Join(pkgDir, from), filepath.Join(pkgDir, next), from, next); err != nil {
			return Fixture{}, err
		}
		if err := copyTree(filepath.Join(pkgDir, next), filepath.Join(f.Added, bundle.PackageOperator, next)); err != nil {
			return Fixture{}, err
		}
		f.Next[from] = next
	}

	channels := filepath.Join(n.Dir, "channels")
	if err := os.MkdirAll(channels, 0o755); err != nil {
		return Fixture{}, err
	}
	files, err := filepath.Glob(filepath.Join(n.Root, "channels", "*"+fbc.TemplateSuffix))
	if err != nil {
		return Fixture{}, err
	}
	extras, err := filepath.Glob(filepath.Join(n.Root, "channels", "*"+fbc.ExtrasSuffix))
	if err != nil {
		return Fixture{}, err
	}
	for _, src := range append(files, extras...) {
		data, err := os.ReadFile(src)
		if err != nil {
			return Fixture{}, err
		}
		if filepath.Base(src) == bundle.PackageOperator+fbc.TemplateSuffix {
			if data, err = listNext(src, data, f.Next); err != nil {
				return Fixture{}, err
			}
		}
		if err := os.WriteFile(filepath.Join(channels, filepath.Base(src)), data, 0o644); err != nil {
			return Fixture{}, err
		}
	}
	if _, err := (fbc.Catalogs{ChannelsDir: channels, Root: n.Dir, OutDir: f.CatalogDir}).Run(ctx); err != nil {
		return Fixture{}, fmt.Errorf("rendering the fixture catalog: %w", err)
	}
	return f, nil
}

// nextPatch writes the bundle at src, version from, to dst as version next:
// every occurrence of from (or v<from>) that is not part of a longer
// version is replaced, and the first line if it is bundlegen's header. It
// checks the CSV and the pin name next.
func nextPatch(src, dst, from, next string) error {
	// Before: not a digit or dot, or one dot after neither ("operator.v1.0.0");
	// after: not a digit, or a dot before no digit.
	version := regexp.MustCompile(`(^|[^0-9.]|[^0-9.]\.)(v?)` + regexp.QuoteMeta(from) + `($|[^0-9.]|\.[^0-9])`)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file; a bundle holds nothing else", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(data)
		if strings.HasPrefix(text, "# Generated by bundlegen") {
			_, rest, _ := strings.Cut(text, "\n")
			text = fmt.Sprintf(fixtureHeader, bundle.PackageOperator, from, next) + rest
		}
		// Twice: a match consumes the character after the version, which
		// may start the next one.
		for range 2 {
			text = version.ReplaceAllString(text, "${1}${2}"+next+"${3}")
		}
		return os.WriteFile(out, []byte(text), 0o644)
	})
	if err != nil {
		return fmt.Errorf("making the fixture bundle %s from %s: %w", next, src, err)
	}
	csvs, err := filepath.Glob(filepath.Join(dst, "manifests", "*.clusterserviceversion.yaml"))
	if err != nil {
		return err
	}
	if len(csvs) != 1 {
		return fmt.Errorf("%s/manifests holds %d CSVs, want 1", src, len(csvs))
	}
	objs, err := ReadObjects(csvs[0])
	if err != nil {
		return err
	}
	spec, _ := objs[0].Object["spec"].(map[string]any)
	if want := bundle.PackageOperator + ".v" + next; objs[0].GetName() != want || spec["version"] != next {
		return fmt.Errorf("the fixture CSV %s is named %s, version %v; want %s, version %s", csvs[0], objs[0].GetName(), spec["version"], want, next)
	}
	pinFile := filepath.Join(dst, "manifests", validate.PinConfigMapName+"_v1_configmap.yaml")
	objs, err = ReadObjects(pinFile)
	if err != nil {
		return err
	}
	data, _ := objs[0].Object["data"].(map[string]any)
	raw, _ := data[validate.PinKey].(string)
	p, err := pin.Parse([]byte(raw))
	if err != nil {
		return fmt.Errorf("%s: %w", pinFile, err)
	}
	if p.OperatorVersion != next {
		return fmt.Errorf("the fixture pin %s names operator %s, want %s", pinFile, p.OperatorVersion, next)
	}
	return nil
}

// listNext lists, in the semver template at path, each next bundle after
// the one it is made from, in every channel type that holds that one.
func listNext(path string, data []byte, next map[string]string) ([]byte, error) {
	t, err := fbc.ParseTemplate(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	listed := map[string]bool{}
	for _, b := range []*fbc.TemplateBundles{&t.Candidate, &t.Fast, &t.Stable} {
		for from, to := range next {
			ref := filepath.Join("bundle", bundle.PackageOperator, from)
			if i := slices.IndexFunc(b.Bundles, func(tb fbc.TemplateBundle) bool { return filepath.Clean(tb.Image) == ref }); i >= 0 {
				b.Bundles = slices.Insert(b.Bundles, i+1, fbc.TemplateBundle{Image: filepath.Join("bundle", bundle.PackageOperator, to)})
				listed[from] = true
			}
		}
	}
	for from := range next {
		if !listed[from] {
			return nil, fmt.Errorf("%s lists no bundle %s in any channel type", path, from)
		}
	}
	return t.Marshal()
}

// copyTree copies the regular files and folders under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file; the release holds nothing else", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
}
