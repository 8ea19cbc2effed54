package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// Epoch is the timestamp of every layer entry and of the image config, so a
// build depends on its input files only (reproducible builds, SOURCE_DATE_EPOCH=0).
var Epoch = time.Unix(0, 0).UTC()

// entry is one file or directory of a layer: its path inside the image
// (relative, slash separated, no leading slash) and where it comes from.
// Directories end in "/"; files come from src, or hold data when src is
// empty. Owner and mode default to root and 0755/0644.
type entry struct {
	name     string // e.g. "manifests/" or "manifests/csv.yaml"
	src      string // file on disk; empty for a directory or inline data
	data     []byte // content of a file without src
	mode     int64  // permission bits (and sticky bit); 0 means the default
	uid, gid int
}

func (e entry) isDir() bool { return strings.HasSuffix(e.name, "/") }

// tree lists a directory from disk as layer entries under prefix (for example
// "manifests"), directories first in path order, keeping only files that keep
// returns true for. Symbolic links and special files are refused: an image
// must hold what the directory shows, not what a link points at.
func tree(root, prefix string, keep func(rel string) bool) ([]entry, error) {
	entries := []entry{{name: prefix + "/"}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			entries = append(entries, entry{name: name + "/"})
		case d.Type().IsRegular():
			if keep == nil || keep(filepath.ToSlash(rel)) {
				entries = append(entries, entry{name: name, src: p})
			}
		default:
			return fmt.Errorf("%s: only regular files and directories can go into an image (found %s); replace it with a copy", p, d.Type())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// layerFrom writes entries as one tar layer: owner root, modes 0755/0644,
// every timestamp Epoch, entries in path order. The tar is built in memory;
// bundles and catalogs are small.
func layerFrom(entries []entry) (v1.Layer, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return compareNames(a.name, b.name) })
	entries = slices.CompactFunc(entries, func(a, b entry) bool { return a.name == b.name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.name,
			ModTime: Epoch,
			Uid:     e.uid,
			Gid:     e.gid,
			Format:  tar.FormatPAX,
		}
		var data []byte
		switch {
		case e.isDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Mode = 0o755
		case e.src != "":
			b, err := atomicfs.ReadFile(e.src)
			if err != nil {
				return nil, err
			}
			data = b
		default:
			data = e.data
		}
		if !e.isDir() {
			hdr.Typeflag = tar.TypeReg
			hdr.Mode = 0o644
			hdr.Size = int64(len(data))
		}
		if e.mode != 0 {
			hdr.Mode = e.mode
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing %s into the layer: %w", e.name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("writing %s into the layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// compareNames orders tar paths so that a directory comes right before its
// contents ("a/" < "a/b" < "a-b/").
func compareNames(a, b string) int {
	return slices.Compare(splitPath(a), splitPath(b))
}

func splitPath(p string) []string {
	return slices.DeleteFunc(strings.Split(p, "/"), func(s string) bool { return s == "" })
}
