package release

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/image"
)

const lockHeader = `# Image digest lock: for every image that channels/releases/*.yaml names by tag,
# the manifest digest its registry serves (sha256:<64 hex>), or ` + "`" + Unresolved + "`" + ` while
# nobody has looked it up. Never write a digest that was not read from the registry.
# bundlegen reads this file offline. A digest pins the image in the bundles; an
# unresolved image ships by its tag: bundlegen validate warns about it, and the
# publish gates (validate --require-digests, image bundle|catalog --push, a release
# input with published: true) refuse it. Fill it from the registries with
#   go run -tags containers_image_openpgp ./tools/bundlegen pin --resolve --version <version>
`

// Unresolved is the lock value of an image whose digest is not known: the
// bundles then carry its tag.
const Unresolved = "unresolved"

// Lock maps an image reference, as written in a release input, to its digest.
type Lock struct {
	// Images maps "registry/repository:tag" to "sha256:<hex>", or to
	// Unresolved when the digest is not known.
	Images map[string]string `json:"images"`
}

// LoadLock reads a lock file. A missing file is an error (wrapping
// fs.ErrNotExist): a mistyped path would otherwise read as a lock without
// digests.
func LoadLock(path string) (Lock, error) {
	data, err := atomicfs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Lock{}, fmt.Errorf("image lock %s does not exist: check --lock (default channels/images.lock), "+
			"or create it with `bundlegen pin --resolve --lock %s`: %w", path, path, err)
	}
	if err != nil {
		return Lock{}, fmt.Errorf("image lock: %w", err)
	}
	var l Lock
	if err := yaml.UnmarshalStrict(data, &l); err != nil {
		return Lock{}, fmt.Errorf("image lock %s: %w", path, err)
	}
	if l.Images == nil {
		l.Images = map[string]string{}
	}
	for _, ref := range slices.Sorted(maps.Keys(l.Images)) {
		if err := image.CheckReference(ref); err != nil {
			return Lock{}, fmt.Errorf("image lock %s: images key: %w", path, err)
		}
		if image.HasDigest(ref) {
			return Lock{}, fmt.Errorf("image lock %s: images key %s already names a digest: the lock holds tags only; remove the entry", path, ref)
		}
		if v := l.Images[ref]; v != Unresolved {
			if err := image.CheckDigest(v); err != nil {
				return Lock{}, fmt.Errorf("image lock %s: images[%s]: %w, or %q; run bundlegen pin --resolve to fill it from the registry", path, ref, err, Unresolved)
			}
		}
	}
	return l, nil
}

// Marshal encodes the lock with its header; keys come out sorted.
func (l Lock) Marshal() ([]byte, error) {
	data, err := yaml.Marshal(l)
	if err != nil {
		return nil, err
	}
	return append([]byte(lockHeader), data...), nil
}

// Write stores the lock at path atomically.
func (l Lock) Write(ctx context.Context, path string) error {
	data, err := l.Marshal()
	if err != nil {
		return err
	}
	return atomicfs.WriteFile(ctx, path, data)
}

// Pinned is the result of pinning a reference through the lock.
type Pinned struct {
	// Ref is the digest reference, or the original tag reference when the
	// lock records the image as unresolved (or has no entry and tags are
	// allowed).
	Ref string
	// Warning is set when Ref is a tag.
	Warning string
	// Unlisted says the lock does not list the image (allowTags let it by).
	Unlisted bool
}

// Pin returns ref by digest: as-is when it already names one, else with the
// digest the lock holds. An image the lock records as unresolved keeps its
// tag, with a warning. An image the lock does not list fails, unless
// allowTags is set, which returns the tag with a warning.
func (l Lock) Pin(ref string, allowTags bool) (Pinned, error) {
	if image.HasDigest(ref) {
		return Pinned{Ref: ref}, nil
	}
	d, ok := l.Images[ref]
	switch {
	case ok && d == Unresolved:
		return Pinned{Ref: ref, Warning: fmt.Sprintf("warning: image %s is unresolved in the image lock: it ships by tag, which may come to name another image; "+
			"run bundlegen pin --resolve before publishing", ref)}, nil
	case ok:
		r, err := image.WithDigest(ref, d)
		return Pinned{Ref: r}, err
	case allowTags:
		return Pinned{Ref: ref, Unlisted: true, Warning: fmt.Sprintf("warning: image %s is not in the image lock and ships by tag (--allow-tags): the image it names may change", ref)}, nil
	}
	return Pinned{}, fmt.Errorf("image %s is not in the image lock: run `bundlegen pin --resolve` to record its digest, "+
		"or add the line `  %s: %s` to the lock while its digest is not known", ref, ref, Unresolved)
}
