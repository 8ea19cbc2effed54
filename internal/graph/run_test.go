package graph_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/atomicfs/atomicfstest"
	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/graph"
)

// twoPackages copies the repository's catalog (two packages) without its
// graph files into dir/catalog, with files of the user's beside them: an
// .indexignore of their own that already keeps *.md and *.svg out, notes,
// and a file named like a leftover.
func twoPackages(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "catalog")
	for _, pkg := range []string{"inferencestack-crds", "inferencestack-operator"} {
		data, err := os.ReadFile(filepath.Join("../..", "catalog", pkg, "catalog.yaml"))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(out, pkg), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(out, pkg, "catalog.yaml"), data, 0o644))
	}
	for name, data := range map[string]string{
		".indexignore": "# mine\n*.md\n*.svg\n.notes.*\n",
		"notes.md":     "my notes\n",
		"inferencestack-crds/.notes.bundlegen-draft": "draft\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(out, name), []byte(data), 0o644))
	}
	return out
}

// TestRunRefuses: the outputs graph must not write, each refused naming
// the path, with every file (and one outside the tree) byte for byte as it
// was.
func TestRunRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, g *graph.Graph, outside string)
		want  []string
	}{
		{name: "a graph.md of the user's in --output", setup: func(t *testing.T, g *graph.Graph, _ string) {
			g.OutDir = filepath.Join(filepath.Dir(g.CatalogDir), "graphs")
			require.NoError(t, os.MkdirAll(filepath.Join(g.OutDir, "inferencestack-crds"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(g.OutDir, "inferencestack-crds", "graph.md"), []byte("mine\n"), 0o644))
		}, want: []string{"graphs/inferencestack-crds/graph.md exists and was not written by bundlegen graph", "choose another --output"}},
		{name: "a graph.svg of the user's", setup: func(t *testing.T, g *graph.Graph, _ string) {
			require.NoError(t, os.WriteFile(filepath.Join(g.CatalogDir, "inferencestack-operator", "graph.svg"), []byte("<svg>\n</svg>\n"), 0o644))
		}, want: []string{"inferencestack-operator/graph.svg exists and was not written by bundlegen graph"}},
		{name: "an .indexignore that does not keep the graphs out", setup: func(t *testing.T, g *graph.Graph, _ string) {
			require.NoError(t, os.WriteFile(filepath.Join(g.CatalogDir, ".indexignore"), []byte("*.md\n.notes.*\n"), 0o644))
		}, want: []string{"catalog/.indexignore was not written by bundlegen graph and does not ignore *.md and *.svg", "add those two lines"}},
		{name: "graph.md is a link out of the tree", setup: func(t *testing.T, g *graph.Graph, outside string) {
			require.NoError(t, os.Symlink(outside, filepath.Join(g.CatalogDir, "inferencestack-crds", "graph.md")))
		}, want: []string{"inferencestack-crds/graph.md is a symbolic link (to ", "outside.md)"}},
		{name: "a named pipe in the catalog", setup: func(t *testing.T, g *graph.Graph, _ string) {
			require.NoError(t, syscall.Mkfifo(filepath.Join(g.CatalogDir, "inferencestack-crds", "pipe"), 0o644))
		}, want: []string{"catalog/inferencestack-crds/pipe is a named pipe (FIFO)"}},
		{name: "a package folder that is a link", setup: func(t *testing.T, g *graph.Graph, outside string) {
			moved := filepath.Join(filepath.Dir(outside), "pkg")
			require.NoError(t, os.Rename(filepath.Join(g.CatalogDir, "inferencestack-operator"), moved))
			require.NoError(t, os.Symlink(moved, filepath.Join(g.CatalogDir, "inferencestack-operator")))
		}, want: []string{"catalog/inferencestack-operator is a symbolic link"}},
		{name: "--output is a protected input", setup: func(t *testing.T, g *graph.Graph, _ string) {
			channels := filepath.Join(filepath.Dir(g.CatalogDir), "channels")
			require.NoError(t, os.MkdirAll(channels, 0o755))
			g.Protected = []string{channels}
			g.OutDir = channels
		}, want: []string{"--output ", "channels: refusing to write to the input"}},
		{name: "--output holds the catalog", setup: func(t *testing.T, g *graph.Graph, _ string) {
			g.OutDir = filepath.Dir(g.CatalogDir)
		}, want: []string{"refusing to write to the input", "catalog"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			outside := filepath.Join(t.TempDir(), "outside.md")
			require.NoError(t, os.WriteFile(outside, []byte("outside\n"), 0o644))
			g := graph.Graph{CatalogDir: twoPackages(t, dir)}
			tc.setup(t, &g, outside)
			before, beforeOutside := atomicfstest.Tree(t, dir), atomicfstest.Tree(t, filepath.Dir(outside))
			_, err := g.Run(context.Background())
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.Equal(t, before, atomicfstest.Tree(t, dir))
			require.Equal(t, beforeOutside, atomicfstest.Tree(t, filepath.Dir(outside)))
		})
	}
}

const killDirEnv = "GRAPH_TEST_KILL_DIR"

// TestKillHelper is the writer TestKilledGraphRun kills.
func TestKillHelper(t *testing.T) {
	ctx, ok := atomicfstest.Child()
	if !ok {
		t.Skip("run by TestKilledGraphRun")
	}
	_, err := graph.Graph{CatalogDir: os.Getenv(killDirEnv)}.Run(ctx)
	require.NoError(t, err)
}

// TestKilledGraphRun kills `graph` (SIGKILL) before every step of its
// writes: after the kill the catalog folder has no graph file or all four,
// or else it holds the journal and readers refuse it; the recovery makes it
// one or the other; the next run draws every graph and leaves nothing else,
// and the user's files survive every kill.
func TestKilledGraphRun(t *testing.T) {
	base := t.TempDir()
	twoPackages(t, base)
	oldTree := atomicfstest.Tree(t, base)
	newer := t.TempDir()
	require.NoError(t, os.CopyFS(newer, os.DirFS(base)))
	_, err := graph.Graph{CatalogDir: filepath.Join(newer, "catalog")}.Run(context.Background())
	require.NoError(t, err)
	newTree := atomicfstest.Tree(t, newer)
	require.Len(t, newTree, len(oldTree)+4, "graph.md and graph.svg of both packages; the user's .indexignore stays")
	require.Equal(t, oldTree["catalog/.indexignore"], newTree["catalog/.indexignore"])

	work := filepath.Join(t.TempDir(), "work")
	out := filepath.Join(work, "catalog")
	seen := map[string]bool{}
	atomicfstest.EveryStep(t, "TestKillHelper", []string{killDirEnv + "=" + out},
		func(int) {
			require.NoError(t, os.RemoveAll(work))
			require.NoError(t, os.CopyFS(work, os.DirFS(base)))
		},
		func(n int, killed bool, log string) {
			t.Logf("step %d: killed %v: %s", n, killed, atomicfstest.LastLine(log))
			got := atomicfstest.Tree(t, work)
			if !maps.Equal(got, oldTree) && !maps.Equal(got, newTree) {
				_, err := fbc.Load(context.Background(), out)
				require.ErrorContains(t, err, "was being written by a bundlegen run that was stopped", "step %d", n)
				require.NoError(t, atomicfs.Recover(out))
				got = atomicfstest.Tree(t, work)
			}
			switch {
			case maps.Equal(got, oldTree):
				seen["old"] = true
			case maps.Equal(got, newTree):
				seen["new"] = true
			default:
				var names []string
				for name := range got {
					names = append(names, name)
				}
				t.Fatalf("killed at step %d: neither no graph nor every graph: %s", n, strings.Join(names, ", "))
			}
			_, err := graph.Graph{CatalogDir: out}.Run(context.Background())
			require.NoError(t, err, "the run after step %d", n)
			require.True(t, maps.Equal(atomicfstest.Tree(t, work), newTree), "the run after step %d", n)
		})
	require.Equal(t, map[string]bool{"old": true, "new": true}, seen)
}
