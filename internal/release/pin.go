package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/operator/pin"
)

// Pin is the operand version pin shipped in the operator bundle's ConfigMap.
type Pin = pin.Pin

// Images are the images a release ships, by digest where the lock knows it.
type Images struct {
	// Operator is the controller image.
	Operator string
	// Operands maps a distribution to its server image.
	Operands map[string]string
	// Cache is the PostgreSQL image of spec.cache; empty when the release
	// names none.
	Cache string
	// Warnings name the images left as tags.
	Warnings []string
	// Unlisted are the warnings about images the lock does not list.
	Unlisted []string
}

// Pin returns the operand pin of release in.
func (i Images) Pin(in Input) Pin {
	return Pin{OperatorVersion: in.Version, LlamaStackVersion: in.LlamaStackVersion, Operands: maps.Clone(i.Operands)}
}

// PinImages pins every image of in through lock. A published release must
// pin every image by digest.
func PinImages(in Input, lock Lock, allowTags bool) (Images, error) {
	out := Images{Operands: map[string]string{}}
	pinField := func(field, ref string) (string, error) {
		p, err := lock.Pin(ref, allowTags)
		if err != nil {
			return "", fmt.Errorf("release input %s: field %s: %w", in.Path, field, err)
		}
		if p.Warning != "" && in.Published {
			return "", fmt.Errorf("release input %s: field %s: the release is published (published: true), but image %s has no digest in the image lock: "+
				"a published release ships digests only; run bundlegen pin --resolve --version %s", in.Path, field, ref, in.Version)
		}
		if p.Warning != "" {
			out.Warnings = append(out.Warnings, p.Warning)
		}
		if p.Unlisted {
			out.Unlisted = append(out.Unlisted, p.Warning)
		}
		return p.Ref, nil
	}
	var err error
	if out.Operator, err = pinField("operatorImage", in.OperatorImage); err != nil {
		return Images{}, err
	}
	for _, d := range slices.Sorted(maps.Keys(in.Operands)) {
		if out.Operands[d], err = pinField("operands."+d, in.Operands[d]); err != nil {
			return Images{}, err
		}
	}
	if in.CacheImage != "" {
		if out.Cache, err = pinField("cacheImage", in.CacheImage); err != nil {
			return Images{}, err
		}
	}
	return out, nil
}

// Resolver returns the digest reference of an image reference.
type Resolver func(ctx context.Context, ref string) (string, error)

// PinRequest computes the operand pin of one release, from the lock or, with
// Resolve, from the registries (recording the digests in the lock).
type PinRequest struct {
	// ReleasesDir holds the <version>.yaml release inputs.
	ReleasesDir string
	// LockPath is the image digest lock.
	LockPath string
	// Version selects the release; empty means the highest.
	Version string
	// Resolve asks the registries for the digests and rewrites the lock.
	Resolve bool
	// Resolver reaches the registries; nil uses image.Resolve.
	Resolver Resolver
	// AllowTags lets images without a digest through, with a warning.
	AllowTags bool
	// Warnings receives warnings; nil discards them.
	Warnings io.Writer
}

// Run returns the pin of the selected release.
func (r PinRequest) Run(ctx context.Context) (Pin, error) {
	path := filepath.Join(r.ReleasesDir, r.Version+".yaml")
	if r.Version == "" {
		var err error
		if path, err = Latest(r.ReleasesDir); err != nil {
			return Pin{}, err
		}
	}
	in, err := LoadInput(path)
	if err != nil {
		return Pin{}, err
	}
	lock, err := LoadLock(r.LockPath)
	if r.Resolve && errors.Is(err, fs.ErrNotExist) {
		// --resolve writes the lock: it may start from none.
		lock, err = Lock{Images: map[string]string{}}, nil
	}
	if err != nil {
		return Pin{}, err
	}
	if r.Resolve {
		resolve := r.Resolver
		if resolve == nil {
			resolve = func(ctx context.Context, ref string) (string, error) {
				return image.Resolve(ctx, ref, image.ResolveOptions{})
			}
		}
		for _, ref := range in.Images() {
			if image.HasDigest(ref) {
				continue
			}
			resolved, err := resolve(ctx, ref)
			if err != nil {
				return Pin{}, fmt.Errorf("release input %s: %w", path, err)
			}
			_, digest, _ := cutDigest(resolved)
			lock.Images[ref] = digest
		}
		if err := lock.Write(ctx, r.LockPath); err != nil {
			return Pin{}, fmt.Errorf("writing image lock: %w", err)
		}
	}
	images, err := PinImages(in, lock, r.AllowTags)
	if err != nil {
		return Pin{}, err
	}
	if r.Warnings != nil {
		for _, w := range images.Warnings {
			fmt.Fprintln(r.Warnings, w)
		}
	}
	return images.Pin(in), nil
}

func cutDigest(ref string) (string, string, bool) {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == '@' {
			return ref[:i], ref[i+1:], true
		}
	}
	return ref, "", false
}
