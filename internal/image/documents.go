package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// The files Documents writes.
const (
	SBOMFile       = "sbom.spdx.json"
	ProvenanceFile = "provenance.intoto.json"
)

// Documents writes the SBOM and provenance of the image built from an input
// to a folder, offline and without a key: the same documents Sign attaches,
// byte for byte, for a release to publish or a reviewer to reproduce.
type Documents struct {
	// Kind, Input and Labels are what the image is built from (as for Build).
	Kind   Kind
	Input  string
	Labels map[string]string
	// Repository is the image's repository (no tag or digest), the name of
	// the documents' subject, e.g. quay.io/inferencestack/inferencestack-catalog.
	Repository string
	// Source is the commit the input comes from; Command the command that
	// builds the image, recorded in the provenance.
	Source  Source
	Command []string
	// SourceOf, when set, gives Source from Input once the output is
	// checked (it reads the git checkout).
	SourceOf func(kind Kind, input string) (Source, error)
	// LabelArgs are the --label KEY=VALUE arguments; when Command is
	// empty, the build command is made from them (BuildCommand).
	LabelArgs []string
	// Output is the folder to write SBOMFile and ProvenanceFile to: missing,
	// empty, or holding only those files.
	Output string
}

// DocumentsResult says what Documents wrote.
type DocumentsResult struct {
	// Image is the digest of the image the documents describe.
	Image      string `json:"image"`
	SBOM       string `json:"sbom"`
	Provenance string `json:"provenance"`
}

// Run builds the image, makes its documents and writes them (both or neither).
func (d Documents) Run(ctx context.Context) (DocumentsResult, error) {
	if err := atomicfs.CheckOutput("--output", d.Output, d.Input); err != nil {
		return DocumentsResult{}, err
	}
	if err := checkDocumentsDir(d.Output); err != nil {
		return DocumentsResult{}, err
	}
	if d.SourceOf != nil {
		src, err := d.SourceOf(d.Kind, d.Input)
		if err != nil {
			return DocumentsResult{}, err
		}
		d.Source = src
	}
	if len(d.Command) == 0 {
		d.Command = BuildCommand(d.Kind, d.Source.InputName(d.Input), d.LabelArgs)
	}
	if err := d.Source.Check(); err != nil {
		return DocumentsResult{}, err
	}
	repo, err := name.NewRepository(d.Repository)
	if err != nil || strings.ContainsAny(d.Repository, "@") {
		return DocumentsResult{}, fmt.Errorf("--image %q: want an image repository without tag or digest, such as quay.io/inferencestack/inferencestack-catalog", d.Repository)
	}
	img, err := buildKind(d.Kind, d.Input, d.Labels)
	if err != nil {
		return DocumentsResult{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return DocumentsResult{}, err
	}
	subject := Subject{Name: repo.Name(), Digest: digest}
	sbom, err := SBOM(d.Kind, d.Input, subject, d.Source)
	if err != nil {
		return DocumentsResult{}, err
	}
	prov, err := Provenance(d.Kind, d.Input, subject, d.Source, d.Command)
	if err != nil {
		return DocumentsResult{}, err
	}
	res := DocumentsResult{Image: repo.Digest(digest.String()).String(),
		SBOM: filepath.Join(d.Output, SBOMFile), Provenance: filepath.Join(d.Output, ProvenanceFile)}
	tx, err := atomicfs.Begin(ctx, d.Output)
	if err != nil {
		return DocumentsResult{}, err
	}
	defer tx.Close()
	tx.Write(res.SBOM, sbom)
	tx.Write(res.Provenance, prov)
	if err := tx.Commit(); err != nil {
		return DocumentsResult{}, err
	}
	return res, nil
}

// checkDocumentsDir refuses a folder that holds anything but the files
// Documents writes: it replaces only its own.
func checkDocumentsDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--output %s: %w", dir, err)
	}
	for _, e := range entries {
		if !slices.Contains([]string{SBOMFile, ProvenanceFile}, e.Name()) || !e.Type().IsRegular() {
			return fmt.Errorf("--output %s holds %s: bundlegen writes only %s and %s there and replaces nothing else; name an empty or new folder",
				dir, e.Name(), SBOMFile, ProvenanceFile)
		}
	}
	return nil
}

// BuildCommand is the command that builds the image of kind from input (a
// path in the repository, Source.InputName) with labels (KEY=VALUE, in the
// order given), as the provenance records it.
func BuildCommand(kind Kind, input string, labels []string) []string {
	cmd := []string{"bundlegen", "image", string(kind), filepath.ToSlash(input)}
	for _, l := range labels {
		cmd = append(cmd, "--label", l)
	}
	return cmd
}
