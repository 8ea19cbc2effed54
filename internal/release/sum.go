package release

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/blang/semver/v4"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// SumInput is the name, in the published sum, of a release's input file.
const SumInput = "input"

const sumHeader = `# Published releases, frozen: the SHA-256 of each one's release input (input) and of
# every file of its bundles (<package>/<path>). bundlegen bundle records a release
# here when its input says published: true (its images are pushed), and from then on
# refuses any change to those files, and catalog any bundle that differs.
# Written by bundlegen, never rewritten; an edit here is an edit of a published release.
`

// Sum is the published sum (channels/published.sum): for each frozen
// release version, the hash of every file that makes it.
type Sum struct {
	// Releases maps a version to its files' hashes, by name: SumInput for
	// the release input, <package>/<path> for a bundle file.
	Releases map[string]map[string]string
}

// Hash is the sum's hash of data: "sha256:<hex>".
func Hash(data []byte) string {
	h := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(h[:])
}

// LoadSum reads a published sum; a missing file (or no path) has no releases.
func LoadSum(path string) (Sum, error) {
	s := Sum{Releases: map[string]map[string]string{}}
	if path == "" {
		return s, nil
	}
	data, err := atomicfs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return Sum{}, fmt.Errorf("published sum: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		bad := func(format string, args ...any) error {
			return fmt.Errorf("published sum %s:%d: %s; the file is written by bundlegen bundle: restore it from git", path, n, fmt.Sprintf(format, args...))
		}
		if len(f) != 3 {
			return Sum{}, bad("want <version> <name> sha256:<hex>, found %q", line)
		}
		if _, err := semver.Parse(f[0]); err != nil {
			return Sum{}, bad("version %q: %v", f[0], err)
		}
		if h, ok := strings.CutPrefix(f[2], "sha256:"); !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			return Sum{}, bad("hash %q is not sha256:<64 hex digits>", f[2])
		}
		files := s.Releases[f[0]]
		if files == nil {
			files = map[string]string{}
			s.Releases[f[0]] = files
		}
		if _, dup := files[f[1]]; dup {
			return Sum{}, bad("%s %s is listed twice", f[0], f[1])
		}
		files[f[1]] = f[2]
	}
	if err := sc.Err(); err != nil {
		return Sum{}, fmt.Errorf("published sum %s: %w", path, err)
	}
	for v, files := range s.Releases {
		if _, ok := files[SumInput]; !ok {
			return Sum{}, fmt.Errorf("published sum %s: release %s has no %s line; restore the file from git", path, v, SumInput)
		}
	}
	return s, nil
}

// Frozen reports whether version is recorded, and so may never change.
func (s Sum) Frozen(version string) bool {
	_, ok := s.Releases[version]
	return ok
}

// Marshal encodes the sum with its header: versions in semver order, names sorted.
func (s Sum) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(sumHeader)
	versions := slices.SortedFunc(maps.Keys(s.Releases), func(a, b string) int {
		return semver.MustParse(a).Compare(semver.MustParse(b))
	})
	for _, v := range versions {
		for _, name := range slices.Sorted(maps.Keys(s.Releases[v])) {
			fmt.Fprintf(&b, "%s %s %s\n", v, name, s.Releases[v][name])
		}
	}
	return b.Bytes()
}

// Write stores the sum at path atomically.
func (s Sum) Write(ctx context.Context, path string) error {
	if path == "" {
		return errors.New("no path for the published sum: give --published")
	}
	return atomicfs.WriteFile(ctx, path, s.Marshal())
}
