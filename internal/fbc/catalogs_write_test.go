package fbc_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/atomicfs/atomicfstest"
	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/graph"
)

// demo copies the demo-operator channels into a temporary folder and
// returns a Catalogs over it that writes into a fresh folder.
func demo(t *testing.T) fbc.Catalogs {
	t.Helper()
	root, err := filepath.Abs("testdata")
	require.NoError(t, err)
	channels := filepath.Join(t.TempDir(), "channels")
	require.NoError(t, os.CopyFS(channels, os.DirFS(filepath.Join(root, "channels"))))
	return fbc.Catalogs{ChannelsDir: channels, Root: root, OutDir: filepath.Join(t.TempDir(), "catalog")}
}

// TestCatalogsRefuse: the bad inputs and outputs tried; each is refused,
// naming the path, and the output folder stays as it was.
func TestCatalogsRefuse(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c *fbc.Catalogs)
		want  []string
	}{
		{
			name: "a catalog the validator rejects: an old package without channels",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				require.NoError(t, os.MkdirAll(filepath.Join(c.OutDir, "stale"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(c.OutDir, "stale", "catalog.yaml"), []byte("schema: olm.package\nname: stale\n"), 0o644))
			},
			want: []string{"the rendered catalog does not validate", "is unchanged", `package "stale"`},
		},
		{
			name: "a downgrade bridge",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				require.NoError(t, os.WriteFile(filepath.Join(c.ChannelsDir, "demo-operator.release.yaml"),
					[]byte("bridges:\n- bundle: 1.0.0\n  skipRange: \">=2.0.0 <3.0.0\"\n"), 0o644))
			},
			want: []string{"/channels/demo-operator.release.yaml: bridges[0].skipRange (bundle 1.0.0", "a downgrade"},
		},
		{
			name: "a bad image in images:",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				require.NoError(t, os.WriteFile(filepath.Join(c.ChannelsDir, "demo-operator.release.yaml"),
					[]byte("images:\n  1.0.0: \"quay.io/x/y:bad tag\"\n"), 0o644))
			},
			want: []string{"/channels/demo-operator.release.yaml: images[\"1.0.0\"]", "does not parse"},
		},
		{
			name: "a catalog.yaml that is not the package's",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				require.NoError(t, os.MkdirAll(filepath.Join(c.OutDir, "demo-operator"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(c.OutDir, "demo-operator", "catalog.yaml"), []byte("my notes\n"), 0o644))
			},
			want: []string{"/demo-operator/catalog.yaml exists and is not the catalog of package \"demo-operator\""},
		},
		{
			name:  "output is the channels folder",
			setup: func(t *testing.T, c *fbc.Catalogs) { c.OutDir = c.ChannelsDir },
			want:  []string{"--output ", "refusing to write to the input"},
		},
		{
			name: "output inside a bundle",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				c.OutDir = filepath.Join(c.Root, "bundle", "demo-operator", "1.0.0", "catalog")
			},
			want: []string{"refusing to write to the input", "bundle/demo-operator/1.0.0"},
		},
		{
			name:  "output holds the bundles",
			setup: func(t *testing.T, c *fbc.Catalogs) { c.OutDir = filepath.Join(c.Root, "bundle") },
			want:  []string{"refusing to write to the input"},
		},
		{
			name: "catalog.yaml is a link to a file outside the tree",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				require.NoError(t, os.MkdirAll(filepath.Join(c.OutDir, "demo-operator"), 0o755))
				require.NoError(t, os.Symlink(outsideFile(t), filepath.Join(c.OutDir, "demo-operator", "catalog.yaml")))
			},
			want: []string{"/demo-operator/catalog.yaml is a symbolic link (to ", "never follows links"},
		},
		{
			name: "a package folder that is a link out of the tree",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				require.NoError(t, os.Symlink(filepath.Dir(outsideFile(t)), filepath.Join(c.OutDir, "demo-operator")))
			},
			want: []string{"/demo-operator is a symbolic link"},
		},
		{
			name: "a named pipe in the output folder",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				require.NoError(t, syscall.Mkfifo(filepath.Join(c.OutDir, "pipe"), 0o644))
			},
			want: []string{"/pipe is a named pipe (FIFO)", "remove it"},
		},
		{
			name: "a named pipe in a bundle",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				c.Root = copyRoot(t, c.Root)
				require.NoError(t, syscall.Mkfifo(filepath.Join(c.Root, "bundle/demo-operator/1.0.1/manifests/pipe"), 0o644))
			},
			want: []string{"bundle/demo-operator/1.0.1/manifests/pipe is a named pipe (FIFO)"},
		},
		{
			name: "a bundle package folder that is a link",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				c.Root = copyRoot(t, c.Root)
				moved := filepath.Join(t.TempDir(), "demo-operator")
				require.NoError(t, os.Rename(filepath.Join(c.Root, "bundle/demo-operator"), moved))
				require.NoError(t, os.Symlink(moved, filepath.Join(c.Root, "bundle/demo-operator")))
			},
			want: []string{"bundle/demo-operator is a symbolic link"},
		},
		{
			name: "a bundle the check refuses",
			setup: func(t *testing.T, c *fbc.Catalogs) {
				c.CheckBundle = func(dir string) error {
					if strings.HasSuffix(dir, "2.1.0") {
						return errors.New("bundle " + dir + " differs from its release input")
					}
					return nil
				}
			},
			want: []string{"bundle/demo-operator/2.1.0 differs from its release input"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := demo(t)
			require.NoError(t, os.MkdirAll(c.OutDir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(c.OutDir, "graph.md"), []byte("kept\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(c.OutDir, ".indexignore"), []byte("*.md\n"), 0o644))
			tc.setup(t, &c)
			before := atomicfstest.Tree(t, filepath.Dir(c.ChannelsDir))
			beforeOut := atomicfstest.TreeIfExists(t, c.OutDir)
			_, err := c.Run(context.Background())
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.Equal(t, before, atomicfstest.Tree(t, filepath.Dir(c.ChannelsDir)), "the inputs are untouched")
			require.Equal(t, beforeOut, atomicfstest.TreeIfExists(t, c.OutDir), "the output is untouched")
		})
	}
}

// outsideFile makes a file outside every tree of the test, and checks at
// the end that it still holds what it held.
func outsideFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "outside.yaml")
	require.NoError(t, os.WriteFile(p, []byte("outside\n"), 0o644))
	t.Cleanup(func() {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, "outside\n", string(data), "the file outside the tree changed")
	})
	return p
}

// copyRoot copies the bundles under root to a temporary root.
func copyRoot(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(dst, "bundle"), os.DirFS(filepath.Join(root, "bundle"))))
	return dst
}

// TestCatalogsKeepOtherFiles: the rendered catalogs replace only their own
// catalog.yaml files; graphs and other files of the folder stay.
func TestCatalogsKeepOtherFiles(t *testing.T) {
	c := demo(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.OutDir, "demo-operator"), 0o755))
	for _, f := range []string{".indexignore", "demo-operator/graph.svg"} {
		require.NoError(t, os.WriteFile(filepath.Join(c.OutDir, f), []byte("*.svg\n"), 0o644))
	}
	_, err := c.Run(context.Background())
	require.NoError(t, err)
	got := atomicfstest.Tree(t, c.OutDir)
	require.Equal(t, "*.svg\n", got["demo-operator/graph.svg"])
	require.Equal(t, "*.svg\n", got[".indexignore"])
	require.Contains(t, got["demo-operator/catalog.yaml"], "name: demo-operator")
}

// release is the repository's two packages: their channels (old: 1.0.0
// only; new: as committed) and the committed bundles.
func release(t *testing.T) (oldChannels, newChannels, oldRoot, root string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	// The old release's root holds only the 1.0.0 bundles: a bundle folder
	// its templates do not list is refused.
	oldRoot = t.TempDir()
	for _, pkg := range []string{"inferencestack-crds", "inferencestack-operator"} {
		require.NoError(t, os.CopyFS(filepath.Join(oldRoot, "bundle", pkg, "1.0.0"), os.DirFS(filepath.Join(root, "bundle", pkg, "1.0.0"))))
	}
	newChannels = filepath.Join(t.TempDir(), "channels")
	oldChannels = filepath.Join(t.TempDir(), "channels")
	for _, pkg := range []string{"inferencestack-crds", "inferencestack-operator"} {
		for _, dir := range []string{newChannels, oldChannels} {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			for _, suffix := range []string{".semver.yaml", ".release.yaml"} {
				data, err := os.ReadFile(filepath.Join(root, "channels", pkg+suffix))
				require.NoError(t, err)
				if dir == oldChannels {
					// every release after 1.0.0
					data = regexp.MustCompile(`(?m)^  - image: bundle/`+pkg+`/(?:[2-9]|1\.0\.[1-9]|1\.[1-9])[^\n]*\n`).ReplaceAll(data, nil)
					data = []byte(strings.Replace(string(data), "\nbridges:\n- bundle: 2.0.0", "\nbridges-off:\n- bundle: 2.0.0", 1))
					if suffix == ".release.yaml" {
						data = []byte(strings.Split(string(data), "\nbridges-off:")[0] + "\n")
					}
				}
				require.NoError(t, os.WriteFile(filepath.Join(dir, pkg+suffix), data, 0o644))
			}
		}
	}
	return oldChannels, newChannels, oldRoot, root
}

const (
	killChannelsEnv = "FBC_TEST_KILL_CHANNELS"
	killRootEnv     = "FBC_TEST_KILL_ROOT"
	killOutEnv      = "FBC_TEST_KILL_OUT"
)

// TestKillHelper is the writer TestKilledCatalogRunLeavesOldOrNew kills.
func TestKillHelper(t *testing.T) {
	ctx, ok := atomicfstest.Child()
	if !ok {
		t.Skip("run by TestKilledCatalogRunLeavesOldOrNew")
	}
	_, err := fbc.Catalogs{ChannelsDir: os.Getenv(killChannelsEnv), Root: os.Getenv(killRootEnv), OutDir: os.Getenv(killOutEnv)}.Run(ctx)
	require.NoError(t, err)
}

// TestKilledCatalogRunLeavesOldOrNew kills `catalog` (SIGKILL) before every
// step of its writes while it adds release 2.0.0 to both packages' catalogs.
// After the kill the folder is both old catalogs or both new ones, or else
// it holds the journal, and then every reader refuses it; the journal's
// recovery makes it old or new; the user's files (named like leftovers)
// survive every kill; the next run ends with the new catalogs, nothing else
// left.
func TestKilledCatalogRunLeavesOldOrNew(t *testing.T) {
	oldChannels, newChannels, oldRoot, root := release(t)
	base := filepath.Join(t.TempDir(), "out")
	oldOut := filepath.Join(base, "catalog")
	_, err := fbc.Catalogs{ChannelsDir: oldChannels, Root: oldRoot, OutDir: oldOut}.Run(context.Background())
	require.NoError(t, err)
	for name, data := range map[string]string{
		".indexignore":  "*.md\n.review.tmp-*\n.notes.*\n",
		"notes.md":      "mine\n",
		".review.tmp-7": "review\n",
		"inferencestack-crds/.notes.bundlegen-draft": "draft\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(oldOut, name), []byte(data), 0o644))
	}
	oldTree := atomicfstest.Tree(t, base)
	newBase := filepath.Join(t.TempDir(), "out")
	require.NoError(t, os.CopyFS(newBase, os.DirFS(base)))
	_, err = fbc.Catalogs{ChannelsDir: newChannels, Root: root, OutDir: filepath.Join(newBase, "catalog")}.Run(context.Background())
	require.NoError(t, err)
	newTree := atomicfstest.Tree(t, newBase)
	for _, pkg := range []string{"inferencestack-crds", "inferencestack-operator"} {
		require.NotContains(t, oldTree["catalog/"+pkg+"/catalog.yaml"], pkg+".v2.0.0")
		require.Contains(t, newTree["catalog/"+pkg+"/catalog.yaml"], pkg+".v2.0.0")
	}

	work := filepath.Join(t.TempDir(), "out")
	out := filepath.Join(work, "catalog")
	seen := map[string]bool{}
	atomicfstest.EveryStep(t, "TestKillHelper",
		[]string{killChannelsEnv + "=" + newChannels, killRootEnv + "=" + root, killOutEnv + "=" + out},
		func(int) {
			require.NoError(t, os.RemoveAll(work))
			require.NoError(t, os.CopyFS(work, os.DirFS(base)))
		},
		func(n int, killed bool, log string) {
			t.Logf("step %d: killed %v: %s", n, killed, atomicfstest.LastLine(log))
			got := atomicfstest.Tree(t, work)
			if !maps.Equal(got, oldTree) && !maps.Equal(got, newTree) {
				_, err := fbc.Load(context.Background(), out)
				require.ErrorContains(t, err, "was being written by a bundlegen run that was stopped", "step %d: readers refuse a mixed folder", n)
				for name := range got {
					if _, ok := newTree[name]; !ok && !strings.HasPrefix(name, "catalog/"+atomicfs.JournalDir+"/") {
						ignored, err := path.Match(atomicfs.LeftoverPattern, path.Base(name))
						require.NoError(t, err)
						require.True(t, ignored, "step %d left %s, which .gitignore does not ignore", n, name)
					}
				}
				require.NoError(t, atomicfs.Recover(out))
				got = atomicfstest.Tree(t, work)
			}
			switch {
			case maps.Equal(got, oldTree):
				seen["old"] = true
			case maps.Equal(got, newTree):
				seen["new"] = true
			default:
				t.Fatalf("killed at step %d (%s): the catalogs are neither both old nor both new", n, log)
			}
			_, err = fbc.Catalogs{ChannelsDir: newChannels, Root: root, OutDir: out}.Run(context.Background())
			require.NoError(t, err, "the run after step %d", n)
			require.True(t, maps.Equal(atomicfstest.Tree(t, work), newTree), "the run after step %d", n)
		})
	require.Equal(t, map[string]bool{"old": true, "new": true}, seen)
}

// TestWriteUnderWayHiddenFromOPM: while catalog writes (its journal and
// staged files beside the targets), operator-registry's own loader, as opm
// and catalogd use it, still reads one catalog per package: the
// .indexignore that graph writes keeps the run's entries out.
func TestWriteUnderWayHiddenFromOPM(t *testing.T) {
	c := demo(t)
	_, err := c.Run(context.Background())
	require.NoError(t, err)
	_, err = graph.Graph{CatalogDir: c.OutDir}.Run(context.Background())
	require.NoError(t, err)
	var seen []string
	ctx := atomicfs.WithHook(context.Background(), func(_, step string) {
		if step != atomicfs.StepRename || seen != nil {
			return
		}
		entries, err := os.ReadDir(filepath.Join(c.OutDir, "demo-operator"))
		require.NoError(t, err)
		for _, e := range entries {
			seen = append(seen, e.Name())
		}
		cfg, err := declcfg.LoadFS(context.Background(), os.DirFS(c.OutDir))
		require.NoError(t, err, "opm's loader during the write")
		require.Len(t, cfg.Packages, 1)
	})
	_, err = fbc.Catalogs{ChannelsDir: c.ChannelsDir, Root: c.Root, OutDir: c.OutDir}.Run(ctx)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(seen, func(n string) bool { return strings.HasPrefix(n, ".catalog.yaml.bundlegen-") }),
		"the staged catalog was there: %v", seen)
}
