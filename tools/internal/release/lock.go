package release

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/tools/internal/image"
)

const lockHeader = `# Image digest lock: the digest of every image named by tag in channels/releases/*.yaml.
# bundlegen reads it offline to pin images by digest. Refresh it from the registries with
#   go run -tags containers_image_openpgp ./tools/bundlegen pin --resolve --version <version>
`

// Lock maps an image reference, as written in a release input, to its digest.
type Lock struct {
	// Images maps "registry/repository:tag" to "sha256:<hex>".
	Images map[string]string `json:"images"`
}

// LoadLock reads a lock file. A missing file is an error (wrapping
// fs.ErrNotExist): a mistyped path would otherwise read as a lock without
// digests.
func LoadLock(path string) (Lock, error) {
	data, err := os.ReadFile(path)
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
		if err := image.CheckDigest(l.Images[ref]); err != nil {
			return Lock{}, fmt.Errorf("image lock %s: images[%s]: %w; run bundlegen pin --resolve to refresh it", path, ref, err)
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
func (l Lock) Write(path string) error {
	data, err := l.Marshal()
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data)
}

// Pinned is the result of pinning a reference through the lock.
type Pinned struct {
	// Ref is the digest reference, or the original tag reference when the
	// lock has no digest for it and tags are allowed.
	Ref string
	// Warning is set when Ref is a tag.
	Warning string
}

// Pin returns ref by digest: as-is when it already names one, else with the
// digest the lock holds. Without a digest it fails, unless allowTags is set,
// which returns the tag with a warning.
func (l Lock) Pin(ref string, allowTags bool) (Pinned, error) {
	if image.HasDigest(ref) {
		return Pinned{Ref: ref}, nil
	}
	if d, ok := l.Images[ref]; ok {
		r, err := image.WithDigest(ref, d)
		return Pinned{Ref: r}, err
	}
	if !allowTags {
		return Pinned{}, fmt.Errorf("image %s has no digest in the image lock: run "+
			"`bundlegen pin --resolve` to record it, or pass --allow-tags to ship the tag (not reproducible)", ref)
	}
	return Pinned{Ref: ref, Warning: fmt.Sprintf("warning: image %s is pinned by tag, not digest: the image it names may change", ref)}, nil
}

// WriteFileAtomic writes data to a temporary file beside path and renames it over path.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
