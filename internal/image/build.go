package image

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/joelanford/ignore"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

const (
	// ConfigsLabel is the label by which catalogd and opm find the file-based
	// catalog inside a catalog image.
	ConfigsLabel = "operators.operatorframework.io.index.configs.v1"
	// ConfigsDir is where the file-based catalog lives in a catalog image.
	ConfigsDir = "/configs"

	// annotationsFile is the bundle metadata file whose annotations become the
	// bundle image labels.
	annotationsFile = "metadata/annotations.yaml"
	// bundlePrefix is the prefix of the annotations that describe a bundle.
	bundlePrefix = "operators.operatorframework.io.bundle."
	// packageKey names the package of a bundle.
	packageKey = bundlePrefix + "package.v1"
	// mediaTypeKey gives the bundle format; OLM v1 reads registry+v1 only.
	mediaTypeKey = bundlePrefix + "mediatype.v1"
	// manifestsKey and metadataKey give the bundle folders inside the image.
	manifestsKey = bundlePrefix + "manifests.v1"
	metadataKey  = bundlePrefix + "metadata.v1"
)

// The OS and architecture written into image configs. The images hold data
// only, so the value is informative; it is fixed so that digests do not
// depend on the machine that builds them.
const (
	platformOS   = "linux"
	platformArch = "amd64"
)

// BuildBundle builds the registry+v1 bundle image of the bundle directory dir
// (holding manifests/ and metadata/), as `COPY manifests /manifests/` and
// `COPY metadata /metadata/` on scratch would: one layer, labels copied from
// metadata/annotations.yaml, every timestamp at Epoch. The same directory
// gives the same digest.
func BuildBundle(dir string) (v1.Image, error) {
	labels, err := bundleLabels(dir)
	if err != nil {
		return nil, err
	}
	var entries []entry
	for _, sub := range []string{"manifests", "metadata"} {
		es, err := tree(filepath.Join(dir, sub), sub, nil)
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", dir, err)
		}
		entries = append(entries, es...)
	}
	layer, err := layerFrom(entries)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	return assemble(v1.Config{Labels: labels}, []v1.Layer{layer}, []string{"bundlegen image bundle"})
}

// bundleLabels reads metadata/annotations.yaml of a bundle directory and
// returns its annotations as image labels, as `opm alpha bundle generate`
// writes them into bundle.Dockerfile. It checks the keys OLM needs.
func bundleLabels(dir string) (map[string]string, error) {
	file := filepath.Join(dir, annotationsFile)
	b, err := atomicfs.ReadFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s not found: %s is not a bundle directory (run `bundlegen bundle` first)", file, dir)
		}
		return nil, err
	}
	var doc struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	a := doc.Annotations
	if a[packageKey] == "" {
		return nil, fmt.Errorf("%s: annotation %s is missing; every bundle names its package", file, packageKey)
	}
	if mt := a[mediaTypeKey]; mt != "registry+v1" {
		return nil, fmt.Errorf("%s: annotation %s is %q; OLM v1 installs registry+v1 bundles only", file, mediaTypeKey, mt)
	}
	for key, want := range map[string]string{manifestsKey: "manifests/", metadataKey: "metadata/"} {
		if got := a[key]; got != "" && path.Clean(strings.TrimPrefix(got, "/")) != path.Clean(want) {
			return nil, fmt.Errorf("%s: annotation %s is %q, but bundle images keep that folder at /%s; set it to %q", file, key, got, want, want)
		}
	}
	return maps.Clone(a), nil
}

// CatalogOptions tune BuildCatalog.
type CatalogOptions struct {
	// Labels are added to the image labels (for example
	// org.opencontainers.image.source). ConfigsLabel cannot be overridden.
	Labels map[string]string
}

// BuildCatalog builds a file-based catalog image from dir (for example
// catalog/, holding <package>/catalog.yaml), as `COPY catalog /configs` on
// scratch would (Dockerfile.catalog): every file of dir lands under /configs,
// and the image carries the label
// operators.operatorframework.io.index.configs.v1=/configs, which is what
// catalogd and opm read.
//
// catalogd and opm parse every file under /configs that no .indexignore
// pattern excludes, so a file that is not YAML or JSON (graph.svg, graph.md)
// must be listed in an .indexignore of dir: BuildCatalog refuses the
// directory otherwise, since the image would not load.
//
// The image holds no opm binary and cannot serve the catalog itself
// (`opm serve`), which OLM v1 does not need.
func BuildCatalog(dir string, opts CatalogOptions) (v1.Image, error) {
	// Never the files of a write under way, or stopped, in the image.
	if err := atomicfs.Pending(dir, "catalog"); err != nil {
		return nil, err
	}
	entries, err := tree(dir, strings.TrimPrefix(ConfigsDir, "/"), nil)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", dir, err)
	}
	matcher, err := ignore.NewMatcher(os.DirFS(dir), indexIgnore)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: reading %s files: %w", dir, indexIgnore, err)
	}
	found := false
	var unparsable []string
	for _, e := range entries {
		if e.isDir() {
			continue
		}
		rel := strings.TrimPrefix(e.name, strings.TrimPrefix(ConfigsDir, "/")+"/")
		if path.Base(rel) == indexIgnore || matcher.Match(rel, false) {
			continue
		}
		if !IsCatalogFile(rel) {
			unparsable = append(unparsable, rel)
			continue
		}
		found = true
	}
	if len(unparsable) > 0 {
		list := strings.Join(unparsable[:min(len(unparsable), 5)], ", ")
		if len(unparsable) > 5 {
			list += fmt.Sprintf(" and %d more", len(unparsable)-5)
		}
		return nil, fmt.Errorf("catalog %s: opm and catalogd would parse %s as catalog files and fail; list them in %s (for example `*.svg` and `*.md`)",
			dir, list, filepath.Join(dir, indexIgnore))
	}
	if !found {
		return nil, fmt.Errorf("catalog %s holds no .yaml, .yml or .json file; render it first with `bundlegen catalog`", dir)
	}
	layer, err := layerFrom(entries)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", dir, err)
	}
	labels := maps.Clone(opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ConfigsLabel] = ConfigsDir
	return assemble(v1.Config{Labels: labels}, []v1.Layer{layer}, []string{"bundlegen image catalog"})
}

// indexIgnore is the gitignore-style file by which opm and catalogd skip
// files of a catalog.
const indexIgnore = ".indexignore"

// IsCatalogFile reports whether a file (slash-separated path relative to the
// catalog root) has an extension opm and catalogd can parse.
func IsCatalogFile(rel string) bool {
	switch strings.ToLower(path.Ext(rel)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// assemble makes an OCI image of layers on scratch with config cfg, all
// timestamps at Epoch and a history entry per layer saying what made it
// (createdBy, one per layer), for the platform platformOS/platformArch.
func assemble(cfg v1.Config, layers []v1.Layer, createdBy []string) (v1.Image, error) {
	return assembleFor(cfg, layers, createdBy, platformArch)
}

// assembleFor is assemble for the architecture arch (GOARCH spelling).
func assembleFor(cfg v1.Config, layers []v1.Layer, createdBy []string, arch string) (v1.Image, error) {
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{
			Layer:     l,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: createdBy[i]},
		}
	}
	img, err := mutate.Append(
		mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: Epoch}
	cf.OS = platformOS
	cf.Architecture = arch
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}
