package image

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	spdxjson "github.com/spdx/tools-golang/json"
	spdxcommon "github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
	"github.com/spdx/tools-golang/spdxlib"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// Media and artifact types of the documents attached to an image.
const (
	// SBOMArtifactType is the artifact type (and layer media type) of the
	// SPDX JSON SBOM attached to an image.
	SBOMArtifactType = "application/spdx+json"
	// ProvenanceArtifactType is the artifact type (and layer media type) of
	// the in-toto statement attached to an image.
	ProvenanceArtifactType = "application/vnd.in-toto+json"
)

// noAssertion is SPDX's "not stated" value.
const noAssertion = "NOASSERTION"

// Source is what an image is built from: a commit of a repository. Its time
// dates the SBOM and the provenance, so both depend on the commit only,
// never on the clock.
type Source struct {
	// Repository is the source repository's URL, e.g.
	// https://github.com/inferencestack/inferencestack.
	Repository string
	// Commit is the full hexadecimal git commit the image is built from.
	Commit string
	// Time is the commit's time (committer date).
	Time time.Time
	// Path is the input's path in the repository (slash separated,
	// relative to its root), which the provenance's build command names:
	// the same commit gives the same documents whatever the spelling of the
	// input's path or the working folder. Empty: the path as given.
	Path string `json:"-"`
}

// InputName is how the documents name input: Path when set, else input
// with slashes.
func (s Source) InputName(input string) string {
	if s.Path != "" {
		return s.Path
	}
	return filepath.ToSlash(input)
}

// Check refuses an incomplete source.
func (s Source) Check() error {
	switch {
	case s.Repository == "":
		return errors.New("source repository is empty: give it with --source (e.g. https://github.com/inferencestack/inferencestack)")
	case len(s.Commit) != 40 && len(s.Commit) != 64 || strings.Trim(strings.ToLower(s.Commit), "0123456789abcdef") != "":
		return fmt.Errorf("commit %q is not a full hexadecimal git commit: give the output of `git rev-parse HEAD` (--commit)", s.Commit)
	case s.Time.IsZero():
		return errors.New("commit time is missing: give the committer date of the commit (--commit-time, `git show -s --format=%cI HEAD`)")
	}
	return nil
}

// Subject is the image an SBOM or provenance statement describes: its
// repository (without tag or digest) and its manifest digest.
type Subject struct {
	Name   string
	Digest v1.Hash
}

// component is one thing an image holds or refers to, as the SBOM lists it.
type component struct {
	name, version string
	sha256        string // hex, optional
	purl          string // optional
	comment       string
	rel           string // SPDX relationship from the image: CONTAINS, DEPENDS_ON, DESCENDANT_OF
	file          bool   // a file of the image rather than a package
}

// SBOM returns the SPDX 2.3 JSON SBOM of the image subject, built by kind
// from input (the bundle or catalog directory, or the operator's binary):
//   - operator: the main module and every Go module and version of the
//     binary's build info, the Go toolchain, and the base layer by digest;
//   - bundle: every file of manifests/ and metadata/ with its digest, and
//     the CSV's related images;
//   - catalog: every file of the catalog and the bundles (name, version,
//     image) it references.
//
// Lists are sorted, the creation time is the commit's and the document
// namespace is derived from the content, so the same input and source give
// the same bytes.
func SBOM(kind Kind, input string, subject Subject, src Source) ([]byte, error) {
	if err := src.Check(); err != nil {
		return nil, err
	}
	var (
		comps []component
		err   error
	)
	switch kind {
	case KindOperator:
		comps, err = operatorComponents(input)
	case KindBundle:
		comps, err = bundleComponents(input)
	case KindCatalog:
		comps, err = catalogComponents(input)
	default:
		return nil, fmt.Errorf("unknown image kind %q: use %q, %q or %q", kind, KindBundle, KindCatalog, KindOperator)
	}
	if err != nil {
		return nil, err
	}
	return spdxDocument(kind, subject, src, comps)
}

func spdxDocument(kind Kind, subject Subject, src Source, comps []component) ([]byte, error) {
	imageID := spdxcommon.ElementID("Image")
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      fmt.Sprintf("%s image %s@%s", kind, subject.Name, subject.Digest),
		DocumentNamespace: "",
		CreationInfo: &spdx.CreationInfo{
			Creators: []spdxcommon.Creator{{CreatorType: "Tool", Creator: "bundlegen"}},
			Created:  src.Time.UTC().Format(time.RFC3339),
		},
		Packages: []*spdx.Package{{
			PackageName:             subject.Name,
			PackageSPDXIdentifier:   imageID,
			PackageVersion:          subject.Digest.String(),
			PackageDownloadLocation: noAssertion,
			PackageChecksums:        []spdxcommon.Checksum{{Algorithm: spdxcommon.SHA256, Value: subject.Digest.Hex}},
			PackageExternalReferences: []*spdx.PackageExternalReference{{
				Category: "PACKAGE-MANAGER", RefType: "purl", Locator: ociPURL(subject.Name, subject.Digest.String()),
			}},
			PackageSourceInfo:       fmt.Sprintf("built from %s at commit %s", src.Repository, src.Commit),
			PackageLicenseConcluded: noAssertion,
			PackageLicenseDeclared:  noAssertion,
			PackageCopyrightText:    noAssertion,
			PrimaryPackagePurpose:   "CONTAINER",
		}},
		Relationships: []*spdx.Relationship{{
			RefA:         spdxcommon.MakeDocElementID("", "DOCUMENT"),
			RefB:         spdxcommon.MakeDocElementID("", string(imageID)),
			Relationship: "DESCRIBES",
		}},
	}
	slices.SortFunc(comps, func(a, b component) int {
		return strings.Compare(a.rel+"\x00"+a.name+"\x00"+a.version, b.rel+"\x00"+b.name+"\x00"+b.version)
	})
	comps = slices.CompactFunc(comps, func(a, b component) bool { return a.rel == b.rel && a.name == b.name && a.version == b.version })
	for _, c := range comps {
		sum := sha256.Sum256([]byte(c.rel + "\x00" + c.name + "\x00" + c.version))
		id := spdxcommon.ElementID(fmt.Sprintf("%s-%x", map[bool]string{true: "File", false: "Package"}[c.file], sum[:8]))
		var checksums []spdxcommon.Checksum
		if c.sha256 != "" {
			checksums = []spdxcommon.Checksum{{Algorithm: spdxcommon.SHA256, Value: c.sha256}}
		}
		if c.file {
			doc.Files = append(doc.Files, &spdx.File{
				FileName:           "./" + c.name,
				FileSPDXIdentifier: id,
				Checksums:          checksums,
				LicenseConcluded:   noAssertion,
				FileCopyrightText:  noAssertion,
				FileComment:        c.comment,
			})
		} else {
			p := &spdx.Package{
				PackageName:             c.name,
				PackageSPDXIdentifier:   id,
				PackageVersion:          c.version,
				PackageDownloadLocation: noAssertion,
				PackageChecksums:        checksums,
				PackageLicenseConcluded: noAssertion,
				PackageLicenseDeclared:  noAssertion,
				PackageCopyrightText:    noAssertion,
				PackageComment:          c.comment,
			}
			if c.purl != "" {
				p.PackageExternalReferences = []*spdx.PackageExternalReference{{Category: "PACKAGE-MANAGER", RefType: "purl", Locator: c.purl}}
			}
			doc.Packages = append(doc.Packages, p)
		}
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA:         spdxcommon.MakeDocElementID("", string(imageID)),
			RefB:         spdxcommon.MakeDocElementID("", string(id)),
			Relationship: c.rel,
		})
	}
	// The namespace must be unique per document: derive it from everything
	// else the document says.
	body, err := encodeSPDX(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	doc.DocumentNamespace = fmt.Sprintf("https://github.com/inferencestack/inferencestack/spdx/%s/%s-%x", kind, subject.Digest.Hex, sum[:16])
	return encodeSPDX(doc)
}

func encodeSPDX(doc *spdx.Document) ([]byte, error) {
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf, spdxjson.Indent("  ")); err != nil {
		return nil, fmt.Errorf("writing the SPDX document: %w", err)
	}
	return buf.Bytes(), nil
}

// ociPURL is the package URL of an image reference (repository plus
// @digest or :tag).
func ociPURL(repo, version string) string {
	return fmt.Sprintf("pkg:oci/%s@%s?repository_url=%s", path.Base(repo), strings.ReplaceAll(version, ":", "%3A"), repo)
}

// imageComponent describes an image reference the image refers to.
func imageComponent(ref, comment string) component {
	c := component{name: ref, version: ref, rel: "DEPENDS_ON", comment: comment}
	if repo, digest, ok := strings.Cut(ref, "@sha256:"); ok {
		c.name, c.version, c.sha256 = repo, "sha256:"+digest, digest
		c.purl = ociPURL(repo, c.version)
		return c
	}
	c.comment = strings.TrimSpace(comment + " (by tag: no digest)")
	return c
}

// operatorComponents reads the Go build info of the operator's binary.
func operatorComponents(binary string) ([]component, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("operator binary %s: reading its Go build info: %w (give the manager binary built by `make image-operator`)", binary, err)
	}
	sum, err := fileSHA256(binary)
	if err != nil {
		return nil, err
	}
	base, err := baseLayerDigest()
	if err != nil {
		return nil, err
	}
	version := strings.TrimPrefix(info.GoVersion, "go")
	comps := []component{
		{name: strings.TrimPrefix(OperatorPath, "/"), version: sum, sha256: sum, rel: "CONTAINS", file: true, comment: "the operator's executable"},
		{name: "stdlib", version: info.GoVersion, purl: "pkg:golang/stdlib@" + version, rel: "CONTAINS", comment: "the Go toolchain and standard library it was built with"},
		{name: "base", version: base.String(), sha256: base.Hex, rel: "DESCENDANT_OF",
			comment: "the base layer bundlegen assembles (users root, nobody, nonroot; /tmp; /home/nonroot); nothing is pulled"},
	}
	for i, mod := range append([]*debug.Module{&info.Main}, info.Deps...) {
		if mod.Replace != nil {
			mod = mod.Replace
		}
		if mod.Path == "" {
			continue
		}
		v := mod.Version
		if v == "" {
			v = "(devel)"
		}
		c := component{name: mod.Path, version: v, rel: "CONTAINS", purl: "pkg:golang/" + mod.Path + "@" + v}
		if mod.Sum != "" {
			c.comment = "go.sum " + mod.Sum
		}
		if i == 0 {
			c.comment = strings.TrimSuffix("the main module; "+c.comment, "; ")
		}
		comps = append(comps, c)
	}
	return comps, nil
}

// bundleComponents lists the files of a bundle directory and its CSV's
// related images.
func bundleComponents(dir string) ([]component, error) {
	var comps []component
	for _, sub := range []string{"manifests", "metadata"} {
		cs, err := fileComponents(filepath.Join(dir, sub), sub)
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", dir, err)
		}
		comps = append(comps, cs...)
	}
	csvs, err := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
	if err != nil {
		return nil, err
	}
	for _, file := range csvs {
		b, err := atomicfs.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var csv struct {
			Spec struct {
				RelatedImages []struct {
					Name  string `json:"name"`
					Image string `json:"image"`
				} `json:"relatedImages"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &csv); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, ri := range csv.Spec.RelatedImages {
			comps = append(comps, imageComponent(ri.Image, "related image "+ri.Name))
		}
	}
	return comps, nil
}

// catalogComponents lists the files of a catalog directory and the bundles
// its olm.bundle entries reference.
func catalogComponents(dir string) ([]component, error) {
	comps, err := fileComponents(dir, strings.TrimPrefix(ConfigsDir, "/"))
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", dir, err)
	}
	var bundles []component
	for _, c := range comps {
		rel := strings.TrimPrefix(c.name, strings.TrimPrefix(ConfigsDir, "/")+"/")
		if !IsCatalogFile(rel) {
			continue
		}
		file := filepath.Join(dir, filepath.FromSlash(rel))
		b, err := atomicfs.ReadFile(file)
		if err != nil {
			return nil, err
		}
		dec := yamlv3.NewDecoder(bytes.NewReader(b))
		for {
			var blob struct {
				Schema     string `yaml:"schema"`
				Package    string `yaml:"package"`
				Name       string `yaml:"name"`
				Image      string `yaml:"image"`
				Properties []struct {
					Type  string `yaml:"type"`
					Value struct {
						Version string `yaml:"version"`
					} `yaml:"value"`
				} `yaml:"properties"`
			}
			if err := dec.Decode(&blob); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if blob.Schema != "olm.bundle" {
				continue
			}
			if blob.Image == "" {
				return nil, fmt.Errorf("%s: bundle %s has no image; render the catalog from bundle images (bundlegen catalog)", file, blob.Name)
			}
			c := imageComponent(blob.Image, fmt.Sprintf("bundle %s of package %s", blob.Name, blob.Package))
			for _, p := range blob.Properties {
				if p.Type == "olm.package" && p.Value.Version != "" {
					c.comment += ", version " + p.Value.Version
				}
			}
			bundles = append(bundles, c)
		}
	}
	return append(comps, bundles...), nil
}

// fileComponents lists the regular files under root as files of the image
// under prefix, with their SHA-256.
func fileComponents(root, prefix string) ([]component, error) {
	entries, err := tree(root, prefix, nil)
	if err != nil {
		return nil, err
	}
	var comps []component
	for _, e := range entries {
		if e.isDir() {
			continue
		}
		sum, err := fileSHA256(e.src)
		if err != nil {
			return nil, err
		}
		comps = append(comps, component{name: e.name, version: sum, sha256: sum, rel: "CONTAINS", file: true})
	}
	return comps, nil
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// baseLayerDigest is the digest of the base layer of binary images.
func baseLayerDigest() (v1.Hash, error) {
	l, err := layerFrom(baseFiles)
	if err != nil {
		return v1.Hash{}, err
	}
	return l.Digest()
}

// ReadSBOM parses an SPDX 2.3 JSON document and checks its version and that
// its relationships name elements it holds.
func ReadSBOM(b []byte) (*spdx.Document, error) {
	var doc spdx.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("not an SPDX JSON document: %w", err)
	}
	if doc.SPDXVersion != spdx.Version {
		return nil, fmt.Errorf("SPDX version %q, want %q", doc.SPDXVersion, spdx.Version)
	}
	if err := spdxlib.ValidateDocument(&doc); err != nil {
		return nil, fmt.Errorf("not a valid SPDX document: %w", err)
	}
	return &doc, nil
}
