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
	"strings"

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
	// Shipped, when set, returns the pin that release version's bundle
	// ships. The pin of a published release (published: true) is that one:
	// it never changes, whatever the lock says now.
	Shipped func(version string) (Pin, error)
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
	if in.Published && r.Resolve {
		return Pin{}, fmt.Errorf("release input %s says published: true: its images and their digests in the image lock are frozen, "+
			"so --resolve, which looks them up again, is only for unpublished releases; a new image ships in channels/releases/<next version>.yaml", path)
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
		frozen, err := publishedImages(r.ReleasesDir)
		if err != nil {
			return Pin{}, err
		}
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
			if v, ok := frozen[ref]; ok && lock.Images[ref] != digest {
				return Pin{}, fmt.Errorf("release input %s: image %s: the registry now serves %s, but published release %s ships it as %s, and a published release's lock digests never change: "+
					"the tag was moved; name the new image by another tag (or by digest) in %s; %s is unchanged", path, ref, digest, v, lock.Images[ref], path, r.LockPath)
			}
			lock.Images[ref] = digest
		}
		if err := lock.Write(ctx, r.LockPath); err != nil {
			return Pin{}, fmt.Errorf("writing image lock: %w", err)
		}
	}
	if in.Published && r.Shipped != nil {
		return r.shipped(in, lock)
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

// shipped returns the pin a published release's bundle ships, warning when
// the lock no longer gives the same images.
func (r PinRequest) shipped(in Input, lock Lock) (Pin, error) {
	held, err := r.Shipped(in.Version)
	if err != nil {
		return Pin{}, fmt.Errorf("release input %s says published: true, so its pin is what its bundle ships: %w", in.Path, err)
	}
	var diffs []string
	images, err := PinImages(in, lock, false)
	if err != nil {
		diffs = append(diffs, err.Error())
	} else {
		now := images.Pin(in)
		for _, d := range slices.Sorted(maps.Keys(held.Operands)) {
			if held.Operands[d] != now.Operands[d] {
				diffs = append(diffs, fmt.Sprintf("operand %s is %s in the bundle but %s through the lock", d, held.Operands[d], now.Operands[d]))
			}
		}
		for _, d := range slices.Sorted(maps.Keys(now.Operands)) {
			if _, ok := held.Operands[d]; !ok {
				diffs = append(diffs, fmt.Sprintf("operand %s is not in the bundle but %s through the lock", d, now.Operands[d]))
			}
		}
	}
	if len(diffs) > 0 && r.Warnings != nil {
		fmt.Fprintf(r.Warnings, "warning: release %s is published and this is the pin its bundle ships, but the image lock %s no longer gives it: %s; "+
			"`bundlegen bundle --check` fails until the lock is restored from git\n", in.Version, r.LockPath, strings.Join(diffs, "; "))
	}
	return held, nil
}

// publishedImages maps each image (as written) of the published releases in
// dir to the version of one of them.
func publishedImages(dir string) (map[string]string, error) {
	versions, err := Versions(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, v := range versions {
		in, err := LoadInput(filepath.Join(dir, v.String()+".yaml"))
		if err != nil {
			return nil, err
		}
		if !in.Published {
			continue
		}
		for _, ref := range in.Images() {
			out[ref] = in.Version
		}
	}
	return out, nil
}

func cutDigest(ref string) (string, string, bool) {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == '@' {
			return ref[:i], ref[i+1:], true
		}
	}
	return ref, "", false
}
