package bundle

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/atomicfs/atomicfstest"
	"github.com/inferencestack/inferencestack/internal/release"
)

// TestPublishedIsTheFreeze: published: true freezes a release on its own.
// Whatever the published sum says, no run writes or regenerates its bundles
// or records it quietly, its lock digests cannot move, and a release input
// deleted under its bundles is refused. Every run (check, write, regenerate,
// publish) fails naming the release and the file, and changes nothing.
func TestPublishedIsTheFreeze(t *testing.T) {
	base := published(t)
	const input = "releases/1.0.0.yaml"
	tests := []struct {
		name string
		edit func(t *testing.T, root string)
		// runs: the Generate settings tried, each must fail.
		runs []func(g *Generate)
		want []string // each with the root's path in front when it starts with "/"
	}{
		{
			name: "the sum deleted, releaseDate edited",
			edit: func(t *testing.T, root string) {
				require.NoError(t, os.Remove(filepath.Join(root, "published.sum")))
				rewrite(t, filepath.Join(root, input), `releaseDate: "2026-11-22T00:00:00Z"`, `releaseDate: "2026-12-01T00:00:00Z"`)
			},
			runs: []func(g *Generate){withCheck, plainRun, withRegenerate},
			want: []string{"/" + input + " says published: true", "/published.sum has no line for release 1.0.0", "tampering", "git checkout --"},
		},
		{
			name: "the sum deleted, releaseDate edited, --publish",
			edit: func(t *testing.T, root string) {
				require.NoError(t, os.Remove(filepath.Join(root, "published.sum")))
				rewrite(t, filepath.Join(root, input), `releaseDate: "2026-11-22T00:00:00Z"`, `releaseDate: "2026-12-01T00:00:00Z"`)
			},
			runs: []func(g *Generate){withPublish("1.0.0")},
			want: []string{"/bundle/inferencestack-crds/1.0.0 differs from what its inputs", "says published: true: a published release is never written"},
		},
		{
			name: "only 1.0.0's lines removed from the sum",
			edit: func(t *testing.T, root string) {
				data, err := os.ReadFile(filepath.Join(root, "published.sum"))
				require.NoError(t, err)
				var kept []string
				for _, l := range strings.SplitAfter(string(data), "\n") {
					if !strings.HasPrefix(l, "1.0.0 ") {
						kept = append(kept, l)
					}
				}
				require.NoError(t, os.WriteFile(filepath.Join(root, "published.sum"), []byte(strings.Join(kept, "")), 0o644))
			},
			runs: []func(g *Generate){withCheck, plainRun, withRegenerate},
			want: []string{"has no line for release 1.0.0", "--publish 1.0.0"},
		},
		{
			name: "the sum's input line edited",
			edit: func(t *testing.T, root string) {
				data, err := os.ReadFile(filepath.Join(root, "published.sum"))
				require.NoError(t, err)
				i := bytes.Index(data, []byte("1.0.0 input sha256:")) + len("1.0.0 input sha256:")
				data[i] = map[bool]byte{true: '1', false: '0'}[data[i] == '0']
				require.NoError(t, os.WriteFile(filepath.Join(root, "published.sum"), data, 0o644))
			},
			runs: []func(g *Generate){withCheck, plainRun, withRegenerate},
			want: []string{"/" + input + " changed after release 1.0.0 was published, or the sum's input line was edited"},
		},
		{
			name: "a lock digest of a published image changed",
			edit: func(t *testing.T, root string) {
				lock, err := release.LoadLock(filepath.Join(root, "images.lock"))
				require.NoError(t, err)
				for ref, d := range lock.Images {
					if strings.Contains(ref, "distribution-starter") {
						lock.Images[ref] = "sha256:" + strings.Repeat("e", 64)
						require.NotEqual(t, d, lock.Images[ref])
					}
				}
				require.NoError(t, lock.Write(context.Background(), filepath.Join(root, "images.lock")))
			},
			runs: []func(g *Generate){withCheck, plainRun, withRegenerate},
			want: []string{"published release 1.0.0: the image lock", "no longer gives the images its frozen bundle ships",
				"operand starter is ", "@sha256:eeee", "inferencestack-operator-pin_v1_configmap.yaml", "restore channels/images.lock from git"},
		},
		{
			name: "a lock entry of a published image removed",
			edit: func(t *testing.T, root string) {
				lock, err := release.LoadLock(filepath.Join(root, "images.lock"))
				require.NoError(t, err)
				for ref := range lock.Images {
					if strings.Contains(ref, "distribution-starter") {
						delete(lock.Images, ref)
					}
				}
				require.NoError(t, lock.Write(context.Background(), filepath.Join(root, "images.lock")))
			},
			runs: []func(g *Generate){withCheck, plainRun},
			want: []string{"published release 1.0.0:", "field operands.starter", "is not in the image lock"},
		},
		{
			name: "the release input deleted, the sum too: orphan bundles",
			edit: func(t *testing.T, root string) {
				require.NoError(t, os.Remove(filepath.Join(root, input)))
				require.NoError(t, os.Remove(filepath.Join(root, "published.sum")))
				// Another release, so that the tree is not empty.
				require.NoError(t, os.WriteFile(filepath.Join(root, "releases", "1.1.0.yaml"), []byte(strings.ReplaceAll(readBase(t, base, input), "1.0.0", "1.1.0")), 0o644))
			},
			runs: []func(g *Generate){withCheck},
			want: []string{"/bundle/inferencestack-crds/1.0.0, ", "/bundle/inferencestack-operator/1.0.0: no release input", "/releases/1.0.0.yaml is missing"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "repo")
			require.NoError(t, os.CopyFS(root, os.DirFS(base)))
			tc.edit(t, root)
			before := atomicfstest.TreeIfExists(t, root)
			for i, run := range tc.runs {
				g := generate(root)
				run(&g)
				_, err := g.Run(context.Background())
				require.Error(t, err, "run %d", i)
				for _, w := range tc.want {
					if strings.HasPrefix(w, "/") {
						w = root + w
					}
					require.ErrorContains(t, err, w, "run %d", i)
				}
				require.Equal(t, before, atomicfstest.TreeIfExists(t, root), "run %d: nothing may change", i)
			}
			_, err := generate(root).Verify(context.Background())
			require.Error(t, err, "catalog's Verify refuses it as well")
		})
	}
}

// TestPublishFlag: --publish records only a release whose input says
// published: true and whose bundles are exactly what its inputs generate;
// it writes only the sum.
func TestPublishFlag(t *testing.T) {
	g := resolvedFixture(t)
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	root := filepath.Dir(g.ReleasesDir)

	p := g
	p.Publish = "1.0.0"
	_, err = p.Run(context.Background())
	require.ErrorContains(t, err, "--publish 1.0.0: release input "+g.ReleasesDir+"/1.0.0.yaml does not say published: true")

	p.Publish = "9.9.9"
	_, err = p.Run(context.Background())
	require.ErrorContains(t, err, "--publish 9.9.9: "+g.ReleasesDir+"/9.9.9.yaml does not exist")

	p.Publish, p.Check = "1.0.0", true
	_, err = p.Run(context.Background())
	require.ErrorContains(t, err, "cannot go with --check or --regenerate")

	rewrite(t, filepath.Join(g.ReleasesDir, "1.0.0.yaml"), "version: 1.0.0\n", "version: 1.0.0\npublished: true\n")
	before := atomicfstest.TreeIfExists(t, filepath.Join(root, "bundle"))
	p.Check = false
	res, err := p.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"1.0.0"}, res.Frozen)
	require.Equal(t, before, atomicfstest.TreeIfExists(t, filepath.Join(root, "bundle")), "--publish writes only the sum")
	_, err = p.Run(context.Background())
	require.ErrorContains(t, err, "--publish 1.0.0: release 1.0.0 is already recorded")
}

func withCheck(g *Generate)      { g.Check = true }
func plainRun(*Generate)         {}
func withRegenerate(g *Generate) { g.Regenerate = true }
func withPublish(v string) func(g *Generate) {
	return func(g *Generate) { g.Publish = v }
}

func readBase(t *testing.T, base, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(base, name))
	require.NoError(t, err)
	return string(data)
}

// TestPinOfPublishedRelease: `pin --version V` of a published release prints
// the pin V's bundle ships, also once the lock was changed (with a warning
// naming the image), and --resolve refuses it.
func TestPinOfPublishedRelease(t *testing.T) {
	base := published(t)
	root := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, os.CopyFS(root, os.DirFS(base)))
	g := generate(root)
	shipped, err := ReadShipped(g.OutputDir, "1.0.0")
	require.NoError(t, err)
	starter := shipped.Pin.Operands["starter"]
	require.Contains(t, starter, "@sha256:")

	lock, err := release.LoadLock(g.LockPath)
	require.NoError(t, err)
	for ref := range lock.Images {
		if strings.Contains(ref, "distribution-starter") {
			lock.Images[ref] = "sha256:" + strings.Repeat("e", 64)
		}
	}
	require.NoError(t, lock.Write(context.Background(), g.LockPath))

	var warnings bytes.Buffer
	req := release.PinRequest{ReleasesDir: g.ReleasesDir, LockPath: g.LockPath, Version: "1.0.0", Warnings: &warnings,
		Shipped: func(v string) (release.Pin, error) {
			s, err := ReadShipped(g.OutputDir, v)
			return s.Pin, err
		}}
	p, err := req.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, shipped.Pin, p, "the bundle's pin, not the lock's")
	require.Contains(t, warnings.String(), "operand starter is "+starter+" in the bundle but ")
	require.Contains(t, warnings.String(), "@sha256:eeee")

	req.Resolve = true
	before := atomicfstest.TreeIfExists(t, root)
	_, err = req.Run(context.Background())
	require.ErrorContains(t, err, "1.0.0.yaml says published: true: its images and their digests in the image lock are frozen")
	require.Equal(t, before, atomicfstest.TreeIfExists(t, root))
}

// TestResolveNeverMovesAPublishedDigest: `pin --resolve` of an unpublished
// release that names an image of a published one refuses to move its lock
// digest when the registry now serves another image under the tag.
func TestResolveNeverMovesAPublishedDigest(t *testing.T) {
	base := published(t)
	root := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, os.CopyFS(root, os.DirFS(base)))
	g := generate(root)
	in, err := release.LoadInput(filepath.Join(g.ReleasesDir, "1.0.0.yaml"))
	require.NoError(t, err)
	next := strings.Replace(strings.Replace(readBase(t, base, "releases/1.0.0.yaml"), "version: 1.0.0\n", "version: 1.0.1\n", 1), "published: true\n", "", 1)
	require.NoError(t, os.WriteFile(filepath.Join(g.ReleasesDir, "1.0.1.yaml"), []byte(next), 0o644))

	starter := in.Operands["starter"]
	img, err := random.Image(64, 1)
	require.NoError(t, err)
	tag, err := name.NewTag(starter)
	require.NoError(t, err)
	require.NoError(t, remote.Write(tag, img), "the tag moves to another image")

	before := atomicfstest.TreeIfExists(t, root)
	_, err = release.PinRequest{ReleasesDir: g.ReleasesDir, LockPath: g.LockPath, Version: "1.0.1", Resolve: true}.Run(context.Background())
	require.ErrorContains(t, err, "image "+starter+": the registry now serves sha256:")
	require.ErrorContains(t, err, "published release 1.0.0 ships it as sha256:")
	require.ErrorContains(t, err, "the tag was moved")
	require.Equal(t, before, atomicfstest.TreeIfExists(t, root), "the lock is unchanged")
}
