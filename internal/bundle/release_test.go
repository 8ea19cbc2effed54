package bundle

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/atomicfs/atomicfstest"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/internal/validate"
	"github.com/inferencestack/inferencestack/test/registry"
)

// resolvedFixture is the fixture with every image served by an in-process
// registry (the upstream names moved to it) and the lock filled by `pin
// --resolve` from there: the digests are those of real (random) images.
func resolvedFixture(t *testing.T) Generate {
	t.Helper()
	host := registry.Registry(t)
	g := fixture(t, func(root string) {
		for _, f := range []string{"releases/1.0.0.yaml", "images.lock"} {
			p := filepath.Join(root, f)
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			data = bytes.ReplaceAll(data, []byte("docker.io/"), []byte(host+"/"))
			data = bytes.ReplaceAll(data, []byte("quay.io/"), []byte(host+"/"))
			require.NoError(t, os.WriteFile(p, data, 0o644))
		}
	})
	in, err := release.LoadInput(filepath.Join(g.ReleasesDir, "1.0.0.yaml"))
	require.NoError(t, err)
	for _, ref := range in.Images() {
		img, err := random.Image(64, 1)
		require.NoError(t, err)
		tag, err := name.NewTag(ref)
		require.NoError(t, err)
		require.NoError(t, remote.Write(tag, img))
	}
	_, err = release.PinRequest{ReleasesDir: g.ReleasesDir, LockPath: g.LockPath, Resolve: true}.Run(context.Background())
	require.NoError(t, err)
	return g
}

// published110 is withRelease110 with 1.1.0's bundles written and its input
// saying published: true: the run it returns (--publish 1.1.0) records it
// in the published sum and writes nothing else.
func published110(t *testing.T) Generate {
	t.Helper()
	g := withRelease110(t)
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	rewrite(t, filepath.Join(g.ReleasesDir, "1.1.0.yaml"), "version: 1.1.0\n", "version: 1.1.0\npublished: true\n")
	g.Publish = "1.1.0"
	return g
}

// TestResolvedDigests: once pin --resolve filled the lock, the bundles name
// every image by digest and pass the publish gate.
func TestResolvedDigests(t *testing.T) {
	g := resolvedFixture(t)
	res, err := g.Run(context.Background())
	require.NoError(t, err)
	for _, r := range res.Reports {
		require.Empty(t, r.Findings, "no tag warnings")
	}
	dir := filepath.Join(g.OutputDir, PackageOperator, "1.0.0")
	pin, err := os.ReadFile(filepath.Join(dir, "manifests", "inferencestack-operator-pin_v1_configmap.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(pin), "/llamastack/distribution-starter@sha256:")
	require.Contains(t, string(pin), "llamaStackVersion: 0.2.23")
	findings, err := validate.Digests(dir)
	require.NoError(t, err)
	require.Empty(t, findings)
	r, err := validate.Bundle{Dir: dir, RequireDigests: true}.Run(context.Background())
	require.NoError(t, err)
	require.False(t, r.HasErrors())
}

// published prepares a frozen release 1.0.0 and returns its root.
func published(t *testing.T) string {
	t.Helper()
	g := resolvedFixture(t)
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	rewrite(t, filepath.Join(g.ReleasesDir, "1.0.0.yaml"), "version: 1.0.0\n", "version: 1.0.0\npublished: true\n")

	check := g
	check.Check = true
	_, err = check.Run(context.Background())
	require.ErrorContains(t, err, "says published: true, but "+g.SumPath+" has no line for release 1.0.0")
	require.ErrorContains(t, err, "bundlegen bundle --publish 1.0.0")
	_, err = g.Run(context.Background())
	require.ErrorContains(t, err, "has no line for release 1.0.0", "published: true alone is never recorded")

	publish := g
	publish.Publish = "1.0.0"
	res, err := publish.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"1.0.0"}, res.Frozen)
	_, err = check.Run(context.Background())
	require.NoError(t, err)
	sum, err := os.ReadFile(g.SumPath)
	require.NoError(t, err)
	require.Contains(t, string(sum), "\n1.0.0 input sha256:")
	require.Contains(t, string(sum), "\n1.0.0 inferencestack-operator/manifests/inferencestack-operator.clusterserviceversion.yaml sha256:")
	return filepath.Dir(g.ReleasesDir)
}

// TestPublishedReleaseIsFrozen: once recorded in the published sum, a
// release refuses any change to its input or its bundles, also with
// --regenerate, naming the file; changes elsewhere do not touch it.
func TestPublishedReleaseIsFrozen(t *testing.T) {
	base := published(t)
	const (
		input = "releases/1.0.0.yaml"
		csv   = "bundle/inferencestack-operator/1.0.0/manifests/inferencestack-operator.clusterserviceversion.yaml"
	)
	tests := []struct {
		name       string
		edit       func(t *testing.T, root string)
		regenerate bool
		want       []string // each with the root's path in front when it starts with "/"
	}{
		{name: "a byte of the release input", edit: func(t *testing.T, root string) {
			rewrite(t, filepath.Join(root, input), "releaseDate: \"2026-11-22T00:00:00Z\"", "releaseDate: \"2026-11-22T00:00:01Z\"")
		}, want: []string{"/" + input + " changed after release 1.0.0 was published", "published.sum", "restore it from git"}},
		{name: "published: true removed", edit: func(t *testing.T, root string) {
			rewrite(t, filepath.Join(root, input), "published: true\n", "")
		}, want: []string{"/" + input + ": field published: release 1.0.0 is frozen"}},
		{name: "a byte of the CSV", edit: func(t *testing.T, root string) {
			rewrite(t, filepath.Join(root, csv), "Basic Install", "Basic install")
		}, want: []string{"/" + csv + " changed", "published release 1.0.0 differs from"}},
		{name: "a byte of the CSV, with --regenerate", regenerate: true, edit: func(t *testing.T, root string) {
			rewrite(t, filepath.Join(root, csv), "Basic Install", "Basic install")
		}, want: []string{"/" + csv + " changed"}},
		{name: "a file added", edit: func(t *testing.T, root string) {
			require.NoError(t, os.WriteFile(filepath.Join(root, "bundle/inferencestack-crds/1.0.0/manifests/extra.yaml"), []byte("x: 1\n"), 0o644))
		}, want: []string{"/bundle/inferencestack-crds/1.0.0/manifests/extra.yaml was added"}},
		{name: "a file removed", edit: func(t *testing.T, root string) {
			require.NoError(t, os.Remove(filepath.Join(root, "bundle/inferencestack-crds/1.0.0/bundle.Dockerfile")))
		}, want: []string{"/bundle/inferencestack-crds/1.0.0/bundle.Dockerfile is missing"}},
		{name: "the bundle removed", edit: func(t *testing.T, root string) {
			require.NoError(t, os.RemoveAll(filepath.Join(root, "bundle/inferencestack-operator/1.0.0")))
		}, want: []string{"bundle/inferencestack-operator/1.0.0 of published release 1.0.0"}},
		{name: "the release input removed", edit: func(t *testing.T, root string) {
			require.NoError(t, os.Remove(filepath.Join(root, input)))
		}, want: []string{"release 1.0.0 is published", "/" + input + " is gone"}},
		{name: "a hash of the sum edited", edit: func(t *testing.T, root string) {
			data, err := os.ReadFile(filepath.Join(root, "published.sum"))
			require.NoError(t, err)
			i := bytes.Index(data, []byte("1.0.0 inferencestack-crds/bundle.Dockerfile sha256:")) + len("1.0.0 inferencestack-crds/bundle.Dockerfile sha256:")
			data[i] ^= 1 // 0-9a-f stays a hex digit or becomes another character: either way refused
			if !strings.ContainsRune("0123456789abcdef", rune(data[i])) {
				data[i] = '0'
			}
			require.NoError(t, os.WriteFile(filepath.Join(root, "published.sum"), data, 0o644))
		}, want: []string{"/bundle/inferencestack-crds/1.0.0/bundle.Dockerfile changed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "repo")
			require.NoError(t, os.CopyFS(root, os.DirFS(base)))
			tc.edit(t, root)
			before := atomicfstest.TreeIfExists(t, root)
			for _, check := range []bool{true, false} {
				g := generate(root)
				g.Check, g.Regenerate = check, tc.regenerate
				_, err := g.Run(context.Background())
				require.Error(t, err, "check=%v", check)
				for _, w := range tc.want {
					if strings.HasPrefix(w, "/") {
						w = root + w
					}
					require.ErrorContains(t, err, w, "check=%v", check)
				}
				require.Equal(t, before, atomicfstest.TreeIfExists(t, root), "nothing may change")
			}
			// The bundle Verify (what catalog relies on) refuses it as well.
			_, err := generate(root).Verify(context.Background())
			require.Error(t, err)
		})
	}

	// What a published release does not depend on may change: it is not
	// regenerated from operator/config any more.
	root := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, os.CopyFS(root, os.DirFS(base)))
	rewrite(t, filepath.Join(root, "manager.yaml"), "- name: manager", "- name: manager\n          workingDir: /")
	before := atomicfstest.TreeIfExists(t, root)
	res, err := generate(root).Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{StateFrozen, StateFrozen}, states(res))
	require.Equal(t, before, atomicfstest.TreeIfExists(t, root))
}

const killRootEnv = "BUNDLE_TEST_KILL_ROOT"

// TestKillHelper is the writer TestKilledRunLeavesOldOrNew kills.
func TestKillHelper(t *testing.T) {
	ctx, ok := atomicfstest.Child()
	if !ok {
		t.Skip("run by TestKilledRunLeavesOldOrNew")
	}
	_, err := generate(os.Getenv(killRootEnv)).Run(ctx)
	require.NoError(t, err)
}

// withRelease110 is the resolved fixture with its bundles written and a
// release 1.1.0, its images resolved (in an in-process registry): the next
// run writes its two bundles.
func withRelease110(t *testing.T) Generate {
	t.Helper()
	g := resolvedFixture(t)
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(g.ReleasesDir, "1.0.0.yaml"))
	require.NoError(t, err)
	data = bytes.ReplaceAll(data, []byte("v1.0.0"), []byte("v1.1.0"))
	data = bytes.Replace(data, []byte("version: 1.0.0\n"), []byte("version: 1.1.0\n"), 1)
	require.NoError(t, os.WriteFile(filepath.Join(g.ReleasesDir, "1.1.0.yaml"), data, 0o644))
	in, err := release.LoadInput(filepath.Join(g.ReleasesDir, "1.1.0.yaml"))
	require.NoError(t, err)
	prev, err := release.LoadInput(filepath.Join(g.ReleasesDir, "1.0.0.yaml"))
	require.NoError(t, err)
	for _, ref := range in.Images() {
		if slices.Contains(prev.Images(), ref) {
			continue // 1.0.0's digest stays
		}
		img, err := random.Image(64, 1)
		require.NoError(t, err)
		tag, err := name.NewTag(ref)
		require.NoError(t, err)
		require.NoError(t, remote.Write(tag, img))
	}
	_, err = release.PinRequest{ReleasesDir: g.ReleasesDir, LockPath: g.LockPath, Version: "1.1.0", Resolve: true}.Run(context.Background())
	require.NoError(t, err)
	return g
}

// TestKilledRunLeavesOldOrNew kills `bundle` (SIGKILL) before every step of
// its writes while it adds release 1.1.0's bundles of both packages and,
// since 1.1.0 says published: true, records it in the published sum. After
// the kill the repository is the old one or the new one, or else bundle/
// holds the journal, and then `bundle --check` refuses it; the journal's
// recovery makes it old or new; the user's files in bundle/ (named like
// leftovers) survive every kill; the next run ends with the new repository,
// nothing else left.
func TestKilledRunLeavesOldOrNew(t *testing.T) {
	g := withRelease110(t)
	base := filepath.Dir(g.ReleasesDir)
	for _, f := range []string{"bundle/.review.tmp-2026", "bundle/.notes.bundlegen-draft", "bundle/inferencestack-operator/.bundlegen-77", "bundle/.bundle.bundlegen-new-1"} {
		require.NoError(t, os.WriteFile(filepath.Join(base, f), []byte("the user's "+f+"\n"), 0o644))
	}
	oldTree := atomicfstest.Tree(t, base)

	newer := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, os.CopyFS(newer, os.DirFS(base)))
	res, err := generate(newer).Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{StateUnchanged, StateUnchanged, StateWritten, StateWritten}, states(res))
	newTree := atomicfstest.Tree(t, newer)
	require.NotEqual(t, oldTree, newTree)

	gitignore, err := os.ReadFile(filepath.Join(repo, ".gitignore"))
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(gitignore), "\n"), atomicfs.LeftoverPattern)
	require.Contains(t, strings.Split(string(gitignore), "\n"), atomicfs.JournalDir+"/")

	root := filepath.Join(t.TempDir(), "repo")
	seen := map[string]bool{}
	atomicfstest.EveryStep(t, "TestKillHelper", []string{killRootEnv + "=" + root},
		func(int) {
			require.NoError(t, os.RemoveAll(root))
			require.NoError(t, os.CopyFS(root, os.DirFS(base)))
		},
		func(n int, killed bool, log string) {
			t.Logf("step %d: killed %v: %s", n, killed, atomicfstest.LastLine(log))
			got := atomicfstest.Tree(t, root)
			if !maps.Equal(got, oldTree) && !maps.Equal(got, newTree) {
				check := generate(root)
				check.Check = true
				_, err := check.Run(context.Background())
				require.ErrorContains(t, err, "was being written by a bundlegen run that was stopped", "step %d: a mixed tree is refused", n)
				for name := range got {
					if _, ok := newTree[name]; !ok && !strings.HasPrefix(name, atomicfs.JournalDir+"/") && !strings.HasPrefix(name, "bundle/"+atomicfs.JournalDir+"/") {
						ignored, err := path.Match(atomicfs.LeftoverPattern, path.Base(name))
						require.NoError(t, err)
						require.True(t, ignored, "step %d left %s, which .gitignore does not ignore", n, name)
					}
				}
				require.NoError(t, atomicfs.Recover(filepath.Join(root, "bundle")))
				got = atomicfstest.Tree(t, root)
			}
			switch {
			case maps.Equal(got, oldTree):
				seen["old"] = true
			case maps.Equal(got, newTree):
				seen["new"] = true
			default:
				t.Fatalf("killed at step %d (%s): the repository is neither the old one nor the new one", n, log)
			}
			if !killed {
				require.True(t, maps.Equal(got, newTree), "a run to the end writes the new tree")
			}
			// The next run ends with the new repository.
			_, err := generate(root).Run(context.Background())
			require.NoError(t, err, "the run after step %d", n)
			require.True(t, maps.Equal(atomicfstest.Tree(t, root), newTree), "the run after step %d", n)
		})
	require.Equal(t, map[string]bool{"old": true, "new": true}, seen, "the kills fall on both sides of the commit point")
}

// TestEveryReleaseChecked: not only the newest release is protected: a byte
// changed in an older release's input or bundle is refused by every run,
// naming the file, until that (unpublished) release is regenerated.
func TestEveryReleaseChecked(t *testing.T) {
	newer := func(t *testing.T, root string) {
		data, err := os.ReadFile(filepath.Join(root, "releases", "1.0.0.yaml"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, "releases", "1.1.0.yaml"), bytes.ReplaceAll(data, []byte("1.0.0"), []byte("1.1.0")), 0o644))
		rewrite(t, filepath.Join(root, "images.lock"), "images:\n", "images:\n  quay.io/inferencestack/inferencestack-operator:v1.1.0: unresolved\n")
	}
	tests := []struct {
		name string
		edit func(t *testing.T, root string)
		want []string // after the root's path
	}{
		{name: "the older input", edit: func(t *testing.T, root string) {
			rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"), "minKubeVersion: 1.30.0", "minKubeVersion: 1.31.0")
		}, want: []string{"/bundle/inferencestack-crds/1.0.0 differs from what its inputs", "/releases/1.0.0.yaml, the image lock"}},
		{name: "the older bundle", edit: func(t *testing.T, root string) {
			rewrite(t, filepath.Join(root, "bundle", PackageOperator, "1.0.0", "manifests", "inferencestack-operator-pin_v1_configmap.yaml"),
				"starter: docker.io/llamastack/distribution-starter:0.2.23", "starter: docker.io/llamastack/distribution-starter:0.2.24")
		}, want: []string{"/bundle/inferencestack-operator/1.0.0 differs from what its inputs", "generate (manifests/inferencestack-operator-pin_v1_configmap.yaml changed)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := fixture(t, func(root string) { newer(t, root) })
			_, err := g.Run(context.Background())
			require.NoError(t, err)
			root := filepath.Dir(g.ReleasesDir)
			tc.edit(t, root)
			before := atomicfstest.Tree(t, g.OutputDir)
			for _, check := range []bool{true, false} {
				g.Check = check
				_, err = g.Run(context.Background())
				for _, w := range tc.want {
					if strings.HasPrefix(w, "/") {
						w = root + w
					}
					require.ErrorContains(t, err, w, "check=%v", check)
				}
				require.Equal(t, before, atomicfstest.Tree(t, g.OutputDir))
			}
			_, err = g.Verify(context.Background())
			require.Error(t, err)
			// Unpublished: --regenerate repairs it; the newest was never at fault.
			g.Check, g.Regenerate = false, true
			res, err := g.Run(context.Background())
			require.NoError(t, err)
			require.Contains(t, states(res), StateRegenerated)
			require.Equal(t, StateUnchanged, res.Bundles[len(res.Bundles)-1].State)
		})
	}
}

// TestConcurrentSaveSurvives: files a user saves into bundle/ while a run
// writes there (here: between its renames) stay, as do files named like
// leftovers that were there before.
func TestConcurrentSaveSurvives(t *testing.T) {
	g := fixture(t, nil)
	_, err := g.Run(context.Background())
	require.NoError(t, err)
	for _, pkg := range Packages {
		require.NoError(t, os.RemoveAll(filepath.Join(g.OutputDir, pkg, "1.0.0")))
	}
	before := map[string]string{".review.tmp-2026": "review\n", ".notes.bundlegen-draft": "draft\n"}
	for name, data := range before {
		require.NoError(t, os.WriteFile(filepath.Join(g.OutputDir, name), []byte(data), 0o644))
	}
	saved := map[string]string{}
	ctx := atomicfs.WithHook(context.Background(), func(_, step string) {
		if step != atomicfs.StepRename || len(saved) > 0 {
			return
		}
		for _, name := range []string{"notes.txt", "inferencestack-operator/todo.txt"} {
			saved[name] = "saved during the run\n"
			require.NoError(t, os.WriteFile(filepath.Join(g.OutputDir, name), []byte(saved[name]), 0o644))
		}
	})
	res, err := g.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{StateWritten, StateWritten}, states(res))
	require.NotEmpty(t, saved, "the hook ran")
	got := atomicfstest.Tree(t, g.OutputDir)
	for name, data := range before {
		require.Equal(t, data, got[name], name)
	}
	for name, data := range saved {
		require.Equal(t, data, got[name], name)
	}
}

// TestSumNotWritable: when the published sum cannot be replaced (immutable),
// the run fails naming it and the cause, and writes no bundle either: the
// release is not left published but unfrozen.
func TestSumNotWritable(t *testing.T) {
	g := published110(t)
	require.NoError(t, os.WriteFile(g.SumPath, release.Sum{Releases: map[string]map[string]string{}}.Marshal(), 0o644))
	out, err := exec.Command("chattr", "+i", g.SumPath).CombinedOutput()
	require.NoError(t, err, "chattr +i (the test needs root and a file system with attributes): %s", out)
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", g.SumPath).Run() })
	before := atomicfstest.Tree(t, filepath.Dir(g.ReleasesDir))
	_, err = g.Run(context.Background())
	require.ErrorContains(t, err, "replacing "+g.SumPath)
	require.ErrorContains(t, err, "read-only or immutable")
	require.ErrorContains(t, err, "recording release 1.1.0 in "+g.SumPath)
	require.ErrorContains(t, err, "nothing was written")
	require.Equal(t, before, atomicfstest.Tree(t, filepath.Dir(g.ReleasesDir)))
}
