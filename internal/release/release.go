// Package release reads the human-edited release inputs under channels/: one
// file per operator version (channels/releases/<version>.yaml) and the image
// digest lock beside them (channels/images.lock), and turns them into the
// images a release ships, by digest.
package release

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Distributions are the distribution names the operator embeds; a release
// input may pin operand images only for these.
var Distributions = func() []string {
	names := make([]string, 0, len(v1alpha1.DistributionNames))
	for _, d := range v1alpha1.DistributionNames {
		names = append(names, string(d))
	}
	slices.Sort(names)
	return names
}()

// Input is one release input file, channels/releases/<version>.yaml.
type Input struct {
	// Version is the operator version, semver without a leading "v".
	Version string `json:"version"`
	// ReleaseDate is the RFC 3339 time of the release; it becomes the CSV's
	// createdAt annotation, so regenerating a bundle never reads the clock.
	ReleaseDate string `json:"releaseDate"`
	// MinKubeVersion is the lowest Kubernetes version the release supports.
	MinKubeVersion string `json:"minKubeVersion"`
	// LlamaStackVersion is the Llama Stack release of every operand image
	// (strict semver, e.g. 0.3.0). It reaches the operator through the pin
	// (llamaStackVersion) and LLAMA_STACK_VERSION, and selects the run-config
	// layout; every operand tag must equal it.
	LlamaStackVersion string `json:"llamaStackVersion"`
	// Published says the release's images are pushed: its input and bundles
	// are then frozen (their hashes go to the published sum and may never
	// change) and every image must be pinned by digest.
	Published bool `json:"published,omitempty"`
	// OperatorImage is the controller image, by tag or digest.
	OperatorImage string `json:"operatorImage"`
	// Operands maps a distribution name to its Llama Stack server image:
	// the one upstream publishes at LlamaStackVersion (its
	// build-distributions workflow's IMAGE_PREFIX at the tag, -<name>:
	// docker.io/llamastack/distribution-<name> until 0.7,
	// docker.io/ogx/distribution-<name> from 0.8.0) or a mirror of it, by
	// tag (equal to LlamaStackVersion) or digest. Only the distributions
	// upstream publishes an image of belong here.
	Operands map[string]string `json:"operands"`
	// CacheImage is the PostgreSQL image of spec.cache (optional; without
	// it the operator uses its built-in default, which is then missing from
	// the bundle's relatedImages).
	CacheImage string `json:"cacheImage,omitempty"`
	// TakesUnlabeledStacks says whether the operator of this release takes
	// InferenceStacks without the inferencestack.io/operator-major label
	// (its --take-unlabeled-stacks flag). Of the majors that may run side by
	// side exactly one must: unset means it does; set it to false in a new
	// major until the previous one reaches its end of life.
	TakesUnlabeledStacks *bool `json:"takesUnlabeledStacks,omitempty"`
	// API is the InferenceStack API versions of the release: the one its
	// operator reads and writes, the ones its CRD package serves and the one
	// that stores. bundlegen cuts the CRD to them and checks them against
	// the other releases (docs/api-versions.md).
	API APIVersions `json:"api"`
	// SourceCommit is the git commit (full hexadecimal) the release's images
	// were built and signed from, recorded with published: true (the commit
	// that holds this line comes later). bundlegen verify --release checks
	// that every image's provenance names it.
	SourceCommit string `json:"sourceCommit,omitempty"`

	// Path is the file the input was read from (for messages).
	Path string `json:"-"`
}

// APIVersions is a release's part of the compatibility matrix.
type APIVersions struct {
	// Reads is the version the operator reads and writes InferenceStacks in.
	Reads string `json:"reads"`
	// Served are the versions the CRD package serves.
	Served []string `json:"served"`
	// Storage is the served version the API server stores objects in.
	Storage string `json:"storage"`
}

// apiVersion is a Kubernetes API version: v1, v1beta2, v2alpha1.
var apiVersion = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)

// SemVer returns the parsed Version.
func (in Input) SemVer() semver.Version {
	return semver.MustParse(in.Version)
}

// TakesUnlabeled reports TakesUnlabeledStacks, true when unset.
func (in Input) TakesUnlabeled() bool {
	return in.TakesUnlabeledStacks == nil || *in.TakesUnlabeledStacks
}

// Created returns ReleaseDate normalized to UTC RFC 3339.
func (in Input) Created() string {
	t, _ := time.Parse(time.RFC3339, in.ReleaseDate)
	return t.UTC().Format(time.RFC3339)
}

// LoadInput reads and checks a release input file.
func LoadInput(path string) (Input, error) {
	data, err := atomicfs.ReadFile(path)
	if err != nil {
		return Input{}, fmt.Errorf("release input: %w", err)
	}
	var in Input
	if err := yaml.UnmarshalStrict(data, &in); err != nil {
		return Input{}, fmt.Errorf("release input %s: %w (fields: version, releaseDate, minKubeVersion, llamaStackVersion, published, operatorImage, operands, cacheImage, takesUnlabeledStacks, api, sourceCommit)", path, err)
	}
	in.Path = path
	return in, in.check()
}

func (in Input) check() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("release input %s: field %s: %s", in.Path, field, fmt.Sprintf(format, args...)))
	}
	if _, err := semver.Parse(in.Version); err != nil {
		fail("version", "%q is not a semantic version (%v): write it as MAJOR.MINOR.PATCH, without a leading v", in.Version, err)
	} else if base := strings.TrimSuffix(filepath.Base(in.Path), filepath.Ext(in.Path)); base != in.Version {
		fail("version", "%q differs from the file name %q: name the file <version>.yaml", in.Version, filepath.Base(in.Path))
	}
	if _, err := time.Parse(time.RFC3339, in.ReleaseDate); err != nil {
		fail("releaseDate", "%q is not an RFC 3339 time such as 2026-11-22T00:00:00Z", in.ReleaseDate)
	}
	if _, err := semver.ParseTolerant(in.MinKubeVersion); err != nil {
		fail("minKubeVersion", "%q is not a version such as 1.30.0", in.MinKubeVersion)
	}
	_, lsvErr := semver.Parse(in.LlamaStackVersion)
	// line is the operator's knowledge of the Llama Stack release, from
	// upstream at its tag ("" when it has none).
	var line stackconfig.Line
	switch {
	case in.LlamaStackVersion == "":
		fail("llamaStackVersion", "missing: name the Llama Stack release of the operand images, such as 0.3.0")
	case lsvErr != nil:
		fail("llamaStackVersion", "%q is not a semantic version (%v): write it as MAJOR.MINOR.PATCH, without a leading v, such as 0.3.0", in.LlamaStackVersion, lsvErr)
	default:
		l, err := stackconfig.LineOf(in.LlamaStackVersion)
		if err != nil {
			fail("llamaStackVersion", "%v: the operator would deploy nothing (every stack Degraded, UnsupportedOperandVersion); "+
				"pin a version it knows, or add the line's data first (operator/runconfig/distributions/<tag>/, the registry in operator/runconfig/stackconfig/line.go)", err)
		}
		line = l
	}
	if err := image.CheckReference(in.OperatorImage); err != nil {
		fail("operatorImage", "%v: write registry/repository:tag or registry/repository@sha256:<digest>", err)
	}
	if in.CacheImage != "" {
		if err := image.CheckReference(in.CacheImage); err != nil {
			fail("cacheImage", "%v: write registry/repository:tag or registry/repository@sha256:<digest>", err)
		}
	}
	if len(in.Operands) == 0 {
		fail("operands", "empty: name the image of at least one distribution (%s)", strings.Join(Distributions, ", "))
	}
	published := line.PublishedDistributions()
	for _, d := range slices.Sorted(maps.Keys(in.Operands)) {
		if !slices.Contains(Distributions, d) {
			fail("operands."+d, "unknown distribution %q: the operator knows %s", d, strings.Join(Distributions, ", "))
			continue
		}
		// Only where the line's facts name what upstream publishes (its
		// build-distributions workflow, from 0.4 on).
		if published != nil && !slices.Contains(published, d) {
			fail("operands."+d, "upstream publishes no image of %s at %s (%s builds %s): remove it; the operator then refuses a stack naming it (Degraded, DistributionNotPinned)",
				d, line.Tag(), ".github/workflows/build-distributions.yml", strings.Join(published, ", "))
			continue
		}
		ref := in.Operands[d]
		if err := image.CheckReference(ref); err != nil {
			fail("operands."+d, "%v: write registry/repository:tag or registry/repository@sha256:<digest>", err)
			continue
		}
		// CheckReference refuses a reference with neither tag nor digest.
		if tag, hasTag := image.Tag(ref); hasTag && lsvErr == nil && tag != in.LlamaStackVersion {
			// Upstream's repository changes with the line
			// (llamastack/distribution-<name> until 0.7,
			// ogx/distribution-<name> from 0.8.0): the line's facts name
			// it; a mirror keeps its own.
			repo, _, _ := strings.Cut(ref, "@")
			repo = strings.TrimSuffix(repo, ":"+tag)
			way := fmt.Sprintf("use %s:%s (the same repository at that release)", repo, in.LlamaStackVersion)
			if up := line.ImageRepository(d); up != "" && up != repo {
				way = fmt.Sprintf("use upstream's %s:%s, or %s:%s where %s mirrors it", up, in.LlamaStackVersion, repo, in.LlamaStackVersion, repo)
			}
			fail("operands."+d, "the tag of %s is %q, but llamaStackVersion is %q: every operand must be the Llama Stack release the operator generates run configs for; "+
				"%s, or change llamaStackVersion", ref, tag, in.LlamaStackVersion, way)
		}
	}
	if c := in.SourceCommit; c != "" && (len(c) != 40 && len(c) != 64 || strings.Trim(c, "0123456789abcdef") != "") {
		fail("sourceCommit", "%q is not a full lowercase hexadecimal git commit: write the output of `git rev-parse <commit>`", c)
	}
	in.checkAPI(fail)
	return errors.Join(errs...)
}

func (in Input) checkAPI(fail func(field, format string, args ...any)) {
	a := in.API
	if a.Reads == "" && len(a.Served) == 0 && a.Storage == "" {
		fail("api", "missing: name the InferenceStack API versions of the release, e.g. api: {reads: v1alpha1, served: [v1alpha1], storage: v1alpha1} (docs/api-versions.md)")
		return
	}
	for field, v := range map[string]string{"api.reads": a.Reads, "api.storage": a.Storage} {
		if !apiVersion.MatchString(v) {
			fail(field, "%q is not a Kubernetes API version such as v1alpha1", v)
		}
	}
	if len(a.Served) == 0 {
		fail("api.served", "empty: list the versions the CRD package serves, such as [v1alpha1]")
	}
	for i, v := range a.Served {
		if !apiVersion.MatchString(v) {
			fail(fmt.Sprintf("api.served[%d]", i), "%q is not a Kubernetes API version such as v1alpha1", v)
		}
		if slices.Index(a.Served, v) != i {
			fail(fmt.Sprintf("api.served[%d]", i), "%s is listed twice", v)
		}
	}
	if a.Storage != "" && !slices.Contains(a.Served, a.Storage) {
		fail("api.storage", "%s is not served (api.served: %v): the storage version must be one the CRD serves", a.Storage, a.Served)
	}
	if a.Reads != "" && !slices.Contains(a.Served, a.Reads) {
		fail("api.reads", "%s is not served by the release's own CRD package (api.served: %v): the operator would find the version it reads missing", a.Reads, a.Served)
	}
}

// Images returns every image of the release: the operator first, then the
// operands in distribution order, then the cache image if any.
func (in Input) Images() []string {
	images := []string{in.OperatorImage}
	for _, d := range slices.Sorted(maps.Keys(in.Operands)) {
		images = append(images, in.Operands[d])
	}
	if in.CacheImage != "" {
		images = append(images, in.CacheImage)
	}
	return images
}

// Latest returns the release input with the highest version in dir.
func Latest(dir string) (string, error) {
	versions, err := Versions(dir)
	if err != nil {
		return "", err
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("no release inputs (<version>.yaml) in %s: add one, see docs/release.md", dir)
	}
	return filepath.Join(dir, versions[len(versions)-1].String()+".yaml"), nil
}

// Versions lists the versions of the release inputs in dir, lowest first.
func Versions(dir string) ([]semver.Version, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("release inputs: %w", err)
	}
	var versions []semver.Version
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".yaml")
		if e.IsDir() || !ok {
			continue
		}
		v, err := semver.Parse(base)
		if err != nil {
			return nil, fmt.Errorf("release input %s: the file name is not <semver>.yaml", filepath.Join(dir, e.Name()))
		}
		if len(v.Build) > 0 {
			plain := v
			plain.Build = nil
			// Semver ignores build metadata when ordering, so 2.0.0+dup would
			// tie with 2.0.0 and one of them would be dropped unseen; OLM
			// v1.11 reads it as a release, older OLM v1 ignores it.
			return nil, fmt.Errorf("release input %s: version %s has build metadata (+%s), which semver ignores when ordering releases "+
				"(it equals %s): name release inputs MAJOR.MINOR.PATCH[-PRERELEASE].yaml and give a changed release a new version",
				filepath.Join(dir, e.Name()), v, strings.Join(v.Build, "."), plain)
		}
		versions = append(versions, v)
	}
	slices.SortFunc(versions, func(a, b semver.Version) int { return a.Compare(b) })
	return versions, nil
}

// CheckUnlabeledOwner checks that, of the newest releases of each major in
// dir, exactly one takes unlabelled InferenceStacks (takesUnlabeledStacks),
// so that with two majors installed side by side every stack has exactly one
// operator.
func CheckUnlabeledOwner(dir string) error {
	versions, err := Versions(dir)
	if err != nil {
		return err
	}
	newest := map[uint64]semver.Version{}
	for _, v := range versions {
		newest[v.Major] = v // versions are sorted, the last one wins
	}
	var takers, all []string
	for _, major := range slices.Sorted(maps.Keys(newest)) {
		path := filepath.Join(dir, newest[major].String()+".yaml")
		in, err := LoadInput(path)
		if err != nil {
			return err
		}
		all = append(all, path)
		if in.TakesUnlabeled() {
			takers = append(takers, path)
		}
	}
	switch {
	case len(all) == 0:
		return nil
	case len(takers) == 0:
		return fmt.Errorf("no major takes InferenceStacks without the inferencestack.io/operator-major label: "+
			"remove takesUnlabeledStacks: false from one of %s", strings.Join(all, ", "))
	case len(takers) > 1:
		return fmt.Errorf("the newest releases of several majors take InferenceStacks without the inferencestack.io/operator-major label "+
			"(%s): installed side by side, they would race for them; set takesUnlabeledStacks: false in all but one",
			strings.Join(takers, ", "))
	}
	return nil
}
