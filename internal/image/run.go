package image

import (
	"context"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// Kind is what an image holds.
type Kind string

const (
	// KindBundle is a registry+v1 bundle image (BuildBundle).
	KindBundle Kind = "bundle"
	// KindCatalog is a file-based catalog image (BuildCatalog).
	KindCatalog Kind = "catalog"
	// KindOperator is the operator image: the static manager binary on an
	// offline base (BuildBinary at OperatorPath).
	KindOperator Kind = "operator"
)

// OperatorPath is where the manager binary lives in the operator image; the
// manager Deployment (operator/config/manager/manager.yaml) runs it.
const OperatorPath = "/manager"

// Build builds one image from a directory and writes it to an OCI layout
// folder, pushes it to a registry, or both.
type Build struct {
	// Kind selects BuildBundle or BuildCatalog.
	Kind Kind
	// Dir is the bundle directory, the catalog directory, or the operator's
	// static manager binary.
	Dir string
	// Labels are extra image labels (catalog and operator).
	Labels map[string]string
	// Layout is the OCI layout folder to write; empty writes none.
	Layout string
	// Tag is recorded as the image name inside the OCI layout (optional).
	Tag string
	// Push is the image reference to push to; empty pushes nothing.
	Push string
}

// Result describes a built image.
type Result struct {
	// Digest is the manifest digest (sha256:...).
	Digest string `json:"digest"`
	// Layout is the OCI layout folder written, if any.
	Layout string `json:"layout,omitempty"`
	// Pushed is the pushed reference by digest, if any.
	Pushed string `json:"pushed,omitempty"`
}

// Run builds the image and writes or pushes it.
func (b Build) Run(ctx context.Context) (Result, error) {
	if b.Layout == "" && b.Push == "" {
		return Result{}, errors.New("nowhere to put the image: give an OCI layout folder (--output) or a reference to push to (--push)")
	}
	if b.Layout != "" {
		if err := atomicfs.CheckOutput("--output", b.Layout, b.Dir); err != nil {
			return Result{}, err
		}
		if err := CheckLayoutDir(b.Layout); err != nil {
			return Result{}, err
		}
	}
	img, err := buildKind(b.Kind, b.Dir, b.Labels)
	if err != nil {
		return Result{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return Result{}, err
	}
	res := Result{Digest: d.String()}
	if b.Layout != "" {
		if err := WriteLayout(ctx, img, b.Layout, b.Tag); err != nil {
			return Result{}, err
		}
		res.Layout = b.Layout
	}
	if b.Push != "" {
		pushed, err := Push(ctx, img, b.Push)
		if err != nil {
			return Result{}, err
		}
		res.Pushed = pushed.String()
	}
	return res, nil
}

// buildKind builds the image of kind from dir (a directory, or the
// operator's binary) with labels (catalog and operator images).
func buildKind(kind Kind, dir string, labels map[string]string) (v1.Image, error) {
	// No half-written tree, link or special file is packed, and nothing
	// that could block is opened.
	if err := atomicfs.CheckInput(dir); err != nil {
		return nil, err
	}
	switch kind {
	case KindBundle:
		return BuildBundle(dir)
	case KindCatalog:
		return BuildCatalog(dir, CatalogOptions{Labels: labels})
	case KindOperator:
		return BuildBinary(dir, BinaryOptions{Path: OperatorPath, Labels: labels})
	}
	return nil, fmt.Errorf("unknown image kind %q: use %q, %q or %q", kind, KindBundle, KindCatalog, KindOperator)
}
