package root_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/atomicfs/atomicfstest"
	"github.com/inferencestack/inferencestack/tools/bundlegen/root"
)

// envMain makes the test binary run bundlegen itself (root.Main, as
// tools/bundlegen/main.go does): the tests below run it as a process, with
// its real exit code, working folder and signal handling.
const envMain = "BUNDLEGEN_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		os.Exit(root.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// bundlegen runs bundlegen as a process in dir and returns its exit code,
// stdout and stderr.
func bundlegen(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envMain+"=1")
	// A run that hangs dies with the test binary (go test -timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("running bundlegen %s: %v", strings.Join(args, " "), err)
	}
	return 0, stdout.String(), stderr.String()
}

// repoCopy copies what the release verbs read and write (go.mod, channels/,
// operator/config/, bundle/, catalog/) into a fresh folder, a repository of
// its own, and returns it.
func repoCopy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "repo")
	for _, p := range []string{"channels", "operator/config", "bundle", "catalog"} {
		require.NoError(t, os.CopyFS(filepath.Join(dst, p), os.DirFS(filepath.Join(repo, p))))
	}
	data, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dst, "go.mod"), data, 0o644))
	return dst
}

// moveOut moves r/p to the outside folder and leaves a symbolic link to it
// in its place.
func moveOut(t *testing.T, r, p, outside string) {
	t.Helper()
	moved := filepath.Join(outside, filepath.Base(p))
	require.NoError(t, os.Rename(filepath.Join(r, p), moved))
	require.NoError(t, os.Symlink(moved, filepath.Join(r, p)))
}

func linkOut(t *testing.T, r, p, outside string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(r, p)))
	require.NoError(t, os.Symlink(filepath.Join(outside, "file.yaml"), filepath.Join(r, p)))
}

func fifo(t *testing.T, r, p string) {
	t.Helper()
	_ = os.Remove(filepath.Join(r, p))
	require.NoError(t, syscall.Mkfifo(filepath.Join(r, p), 0o644))
}

func chattr(t *testing.T, flag, path string) {
	t.Helper()
	out, err := exec.Command("chattr", flag, path).CombinedOutput()
	require.NoError(t, err, "chattr %s %s (the test needs root and a file system with attributes): %s", flag, path, out)
	if flag == "+i" {
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
	}
}

// userFiles are files a user keeps in bundle/ and catalog/, named like the
// leftovers of earlier bundlegen versions; catalog/.indexignore is the
// user's own, so that operator-registry does not read them as catalog files
// (graph keeps it: it already keeps the graph files out).
var userFiles = map[string]string{
	"bundle/.review.tmp-2026":                            "my review\n",
	"bundle/.notes.bundlegen-draft":                      "my draft\n",
	"bundle/inferencestack-operator/.bundlegen-77":       "mine\n",
	"catalog/.review.tmp-7":                              "my review\n",
	"catalog/inferencestack-crds/.notes.bundlegen-draft": "my draft\n",
}

const userIndexIgnore = "# mine\n*.md\n*.svg\n.review.tmp-*\n.notes.*\n"

// fsCase is a run of one verb on a repository copy after setup. Every file
// of the copy and of the outside folder must be byte for byte what it was
// before the run (a verb that refuses writes nothing; a run that succeeds
// here has nothing to change); same names the files the case is about,
// reported by name when they changed.
type fsCase struct {
	name string
	// setup prepares the repository copy r; outside is a folder outside it
	// holding file.yaml.
	setup func(t *testing.T, r, outside string)
	// dir is the working folder, relative to r ("" for r itself); args
	// may use R for r's path.
	dir  string
	args []string
	// code is the exit code; want are fragments of its output (stdout and
	// stderr).
	code int
	want []string
	same []string
	// absent are paths (relative to r, may climb out of it) that must not
	// exist after the run.
	absent []string
}

func runFS(t *testing.T, tests []fsCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Each case has its own repository copy and bundlegen process.
			t.Parallel()
			r, outside := repoCopy(t), t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(outside, "file.yaml"), []byte("outside: the user's\n"), 0o644))
			for p, data := range userFiles {
				require.NoError(t, os.WriteFile(filepath.Join(r, p), []byte(data), 0o644))
			}
			require.NoError(t, os.WriteFile(filepath.Join(r, "catalog", ".indexignore"), []byte(userIndexIgnore), 0o644))
			if tc.setup != nil {
				tc.setup(t, r, outside)
			}
			read := func(p string) string {
				if !filepath.IsAbs(p) {
					p = filepath.Join(r, p)
				}
				data, err := os.ReadFile(p)
				require.NoError(t, err)
				return string(data)
			}
			same := map[string]string{}
			for _, p := range tc.same {
				same[p] = read(strings.ReplaceAll(p, "OUT", outside))
			}
			before, beforeOutside := atomicfstest.Tree(t, r), atomicfstest.Tree(t, outside)
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "R", r)
			}
			code, stdout, stderr := bundlegen(t, filepath.Join(r, tc.dir), args...)
			require.Equal(t, tc.code, code, "bundlegen %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout, stderr)
			for _, w := range tc.want {
				require.Contains(t, stdout+stderr, strings.ReplaceAll(w, "R/", r+"/"))
			}
			for p, data := range same {
				require.Equal(t, data, read(strings.ReplaceAll(p, "OUT", outside)), "%s changed", p)
			}
			for _, p := range tc.absent {
				_, err := os.Lstat(filepath.Join(r, p))
				require.ErrorIs(t, err, os.ErrNotExist, "%s was written", p)
			}
			require.Equal(t, before, atomicfstest.Tree(t, r), "the repository changed")
			require.Equal(t, beforeOutside, atomicfstest.Tree(t, outside), "the outside folder changed")
		})
	}
}

func TestFilesystemBundle(t *testing.T) {
	runFS(t, []fsCase{
		{name: "a named pipe in bundle/", setup: func(t *testing.T, r, _ string) { fifo(t, r, "bundle/inferencestack-operator/notes") },
			args: []string{"bundle"}, code: 1, want: []string{"bundle/inferencestack-operator/notes is a named pipe (FIFO)", "remove it"}},
		{name: "a named pipe in bundle/, --check", setup: func(t *testing.T, r, _ string) { fifo(t, r, "bundle/inferencestack-operator/notes") },
			args: []string{"bundle", "--check"}, code: 1, want: []string{"bundle/inferencestack-operator/notes is a named pipe (FIFO)"}},
		{name: "a named pipe as a bundle file", setup: func(t *testing.T, r, _ string) {
			fifo(t, r, "bundle/inferencestack-crds/2.0.0/metadata/annotations.yaml")
		}, args: []string{"bundle"}, code: 1, want: []string{"bundle/inferencestack-crds/2.0.0/metadata/annotations.yaml is a named pipe (FIFO)"}},
		{name: "a bundle package folder that is a link out of the tree", setup: func(t *testing.T, r, outside string) {
			moveOut(t, r, "bundle/inferencestack-crds", outside)
			require.NoError(t, os.RemoveAll(filepath.Join(outside, "inferencestack-crds", "2.0.0")))
		}, args: []string{"bundle"}, code: 1, want: []string{"bundle/inferencestack-crds is a symbolic link (to ", "never follows links"},
			same: []string{"OUT/inferencestack-crds/1.0.0/metadata/annotations.yaml"}},
		{name: "the image lock is a link", setup: func(t *testing.T, r, outside string) { linkOut(t, r, "channels/images.lock", outside) },
			args: []string{"bundle"}, code: 1, want: []string{"channels/images.lock is a symbolic link"}, same: []string{"OUT/file.yaml"}},
		{name: "the published sum is a named pipe", setup: func(t *testing.T, r, _ string) { fifo(t, r, "channels/published.sum") },
			args: []string{"bundle"}, code: 1, want: []string{"channels/published.sum is a named pipe (FIFO)"}},
		{name: "a release input is a named pipe", setup: func(t *testing.T, r, _ string) { fifo(t, r, "channels/releases/3.0.0.yaml") },
			args: []string{"bundle", "--check"}, code: 1, want: []string{"channels/releases/3.0.0.yaml is a named pipe (FIFO)"}},
		{name: "an immutable bundle/", setup: func(t *testing.T, r, _ string) {
			for _, pkg := range []string{"inferencestack-crds", "inferencestack-operator"} {
				require.NoError(t, os.RemoveAll(filepath.Join(r, "bundle", pkg, "2.0.0")))
			}
			chattr(t, "+i", filepath.Join(r, "bundle"))
		}, args: []string{"bundle"}, code: 1, want: []string{"bundle/.bundlegen: operation not permitted", "read-only or immutable", "lsattr", "bundle is unchanged"}},
		{name: "an immutable bundle package folder", setup: func(t *testing.T, r, _ string) {
			for _, pkg := range []string{"inferencestack-crds", "inferencestack-operator"} {
				require.NoError(t, os.RemoveAll(filepath.Join(r, "bundle", pkg, "2.0.0")))
			}
			chattr(t, "+i", filepath.Join(r, "bundle/inferencestack-operator"))
		}, args: []string{"bundle"}, code: 1, want: []string{"creating bundle/inferencestack-operator/2.0.0: mkdir bundle/inferencestack-operator/2.0.0: operation not permitted", "read-only or immutable"}},
		{name: "--output . typed", args: []string{"bundle", "--output", "."}, code: 1, want: []string{"--output .: refusing to write to the working folder"}},
		{name: "--check from bundle/<package>", dir: "bundle/inferencestack-operator", args: []string{"bundle", "--check"},
			want: []string{"../inferencestack-operator/2.0.0: up to date, valid"}},
		{name: "from bundle/<package>, nothing to write", dir: "bundle/inferencestack-operator", args: []string{"bundle"},
			want: []string{"../inferencestack-operator/2.0.0: unchanged, valid"}, same: []string{"bundle/.review.tmp-2026"}},
		{name: "--regenerate with nothing to change keeps the user's files", args: []string{"bundle", "--regenerate"},
			want: []string{"bundle/inferencestack-crds/1.0.0: unchanged"}, same: []string{"bundle/.review.tmp-2026", "bundle/.notes.bundlegen-draft"}},
	})
}

func TestFilesystemCatalog(t *testing.T) {
	runFS(t, []fsCase{
		{name: "catalog.yaml is a link to a file outside", setup: func(t *testing.T, r, outside string) {
			linkOut(t, r, "catalog/inferencestack-operator/catalog.yaml", outside)
		}, args: []string{"catalog"}, code: 1, want: []string{"catalog/inferencestack-operator/catalog.yaml is a symbolic link (to ", "file.yaml)"},
			same: []string{"OUT/file.yaml"}},
		{name: "a catalog package folder that is a link", setup: func(t *testing.T, r, outside string) {
			moveOut(t, r, "catalog/inferencestack-crds", outside)
		}, args: []string{"catalog"}, code: 1, want: []string{"catalog/inferencestack-crds is a symbolic link"},
			same: []string{"OUT/inferencestack-crds/catalog.yaml"}},
		{name: "a named pipe in catalog/", setup: func(t *testing.T, r, _ string) { fifo(t, r, "catalog/pipe") },
			args: []string{"catalog"}, code: 1, want: []string{"catalog/pipe is a named pipe (FIFO)"}},
		{name: "a template that is a named pipe", setup: func(t *testing.T, r, _ string) { fifo(t, r, "channels/extra.semver.yaml") },
			args: []string{"catalog"}, code: 1, want: []string{"channels/extra.semver.yaml is a named pipe (FIFO)"}},
		{name: "catalog extras that are a link", setup: func(t *testing.T, r, outside string) {
			linkOut(t, r, "channels/inferencestack-crds.release.yaml", outside)
		}, args: []string{"catalog"}, code: 1, want: []string{"channels/inferencestack-crds.release.yaml is a symbolic link"}},
		{name: "a bundle package folder that is a link", setup: func(t *testing.T, r, outside string) {
			moveOut(t, r, "bundle/inferencestack-operator", outside)
		}, args: []string{"catalog"}, code: 1, want: []string{"bundle/inferencestack-operator is a symbolic link"}},
		{name: "an immutable catalog.yaml", setup: func(t *testing.T, r, _ string) {
			// Without graph files, the catalog renders differently from
			// what is there: the write has something to do.
			data := strings.Replace(readFile(t, filepath.Join(r, "catalog/inferencestack-crds/catalog.yaml")), "schema: olm.package", "schema: olm.package\ndescription: old", 1)
			require.NoError(t, os.WriteFile(filepath.Join(r, "catalog/inferencestack-crds/catalog.yaml"), []byte(data), 0o644))
			chattr(t, "+i", filepath.Join(r, "catalog/inferencestack-crds/catalog.yaml"))
		}, args: []string{"catalog"}, code: 1, want: []string{"replacing catalog/inferencestack-crds/catalog.yaml", "operation not permitted", "read-only or immutable", "catalog is unchanged"}},
		{name: "from outside the repository, every path given", dir: "..", args: []string{"catalog", "--channels", "R/channels", "--root", "R", "-o", "R/catalog"},
			want: []string{"wrote R/catalog/inferencestack-crds/catalog.yaml"}, same: []string{"catalog/.review.tmp-7"}},
	})
}

func TestFilesystemGraph(t *testing.T) {
	tests := []fsCase{
		{name: "a named pipe in catalog/", setup: func(t *testing.T, r, _ string) { fifo(t, r, "catalog/inferencestack-crds/pipe") },
			args: []string{"graph"}, code: 1, want: []string{"catalog/inferencestack-crds/pipe is a named pipe (FIFO)"}},
		{name: "graph.md is a link out of the tree", setup: func(t *testing.T, r, outside string) {
			linkOut(t, r, "catalog/inferencestack-crds/graph.md", outside)
		}, args: []string{"graph"}, code: 1, want: []string{"catalog/inferencestack-crds/graph.md is a symbolic link"}, same: []string{"OUT/file.yaml"}},
		{name: "a graph.md of the user's in --output", setup: func(t *testing.T, r, _ string) {
			require.NoError(t, os.MkdirAll(filepath.Join(r, "graphs/inferencestack-crds"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(r, "graphs/inferencestack-crds/graph.md"), []byte("mine\n"), 0o644))
		}, args: []string{"graph", "-o", "graphs"}, code: 1, want: []string{"graphs/inferencestack-crds/graph.md exists and was not written by bundlegen graph"},
			same: []string{"graphs/inferencestack-crds/graph.md"}},
		{name: "an immutable graph.svg", setup: func(t *testing.T, r, _ string) {
			p := filepath.Join(r, "catalog/inferencestack-operator/graph.svg")
			require.NoError(t, os.WriteFile(p, []byte(strings.Replace(readFile(t, p), "</svg>", "</svg>\n", 1)), 0o644))
			chattr(t, "+i", p)
		}, args: []string{"graph"}, code: 1, want: []string{"replacing catalog/inferencestack-operator/graph.svg", "read-only or immutable", "no graph file was written"}},
		{name: "nothing to change", args: []string{"graph"}, want: []string{"wrote catalog/inferencestack-crds/graph.svg"}},
	}
	for _, o := range []string{".", "..", "R", "channels", "channels/releases", "operator/config", "operator", "bundle", "bundle/inferencestack-crds"} {
		want := "refusing to write to the input"
		switch o {
		case ".", "..":
			want = "--output " + o + ": refusing to write to the working folder"
		case "R":
			want = "refusing to write to the working folder"
		}
		tests = append(tests, fsCase{name: "-o " + o, args: []string{"graph", "-o", o}, code: 1, want: []string{want}})
	}
	runFS(t, tests)
}

func TestFilesystemReaders(t *testing.T) {
	runFS(t, []fsCase{
		{name: "validate catalog, a named pipe", setup: func(t *testing.T, r, _ string) { fifo(t, r, "catalog/inferencestack-crds/pipe") },
			args: []string{"validate", "catalog"}, code: 1, want: []string{"catalog/inferencestack-crds/pipe is a named pipe (FIFO)"}},
		{name: "validate catalog, a package folder that is a link", setup: func(t *testing.T, r, outside string) {
			moveOut(t, r, "catalog/inferencestack-crds", outside)
		}, args: []string{"validate", "catalog"}, code: 1, want: []string{"catalog/inferencestack-crds is a symbolic link"}},
		{name: "validate catalog, a stopped write's journal", setup: func(t *testing.T, r, _ string) {
			require.NoError(t, os.MkdirAll(filepath.Join(r, "catalog/.bundlegen"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(r, "catalog/.bundlegen/journal"), []byte("bundlegen transaction journal v1\n{}"), 0o644))
		}, args: []string{"validate", "catalog"}, code: 1, want: []string{"was being written by a bundlegen run that was stopped", "run `bundlegen catalog` again"}},
		{name: "upgrades, a named pipe", setup: func(t *testing.T, r, _ string) { fifo(t, r, "catalog/pipe") },
			args: []string{"upgrades", "--from", "1.0.0"}, code: 1, want: []string{"catalog/pipe is a named pipe (FIFO)"}},
		{name: "pin, the lock is a named pipe", setup: func(t *testing.T, r, _ string) { fifo(t, r, "channels/images.lock") },
			args: []string{"pin", "--version", "1.0.0"}, code: 1, want: []string{"channels/images.lock is a named pipe (FIFO)"}},
		{name: "validate bundle, a named pipe", setup: func(t *testing.T, r, _ string) { fifo(t, r, "bundle/inferencestack-crds/1.0.0/manifests/pipe") },
			args: []string{"validate", "bundle", "bundle/inferencestack-crds/1.0.0"}, code: 1, want: []string{"bundle/inferencestack-crds/1.0.0/manifests/pipe is a named pipe (FIFO)"}},
	})
}

// TestImmutableFileInBundle: a bundle file that cannot be replaced stops
// the run before anything changes, naming the file and the cause; once it
// can be replaced again, the next run writes, with no word of a stopped run.
func TestImmutableFileInBundle(t *testing.T) {
	r := repoCopy(t)
	p := filepath.Join(r, "bundle/inferencestack-operator/2.0.0/metadata/annotations.yaml")
	require.NoError(t, os.WriteFile(p, []byte(readFile(t, p)+"# an edit\n"), 0o644))
	chattr(t, "+i", p)
	before := atomicfstest.Tree(t, r)
	code, _, stderr := bundlegen(t, r, "bundle", "--regenerate")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "replacing bundle/inferencestack-operator/2.0.0/metadata/annotations.yaml")
	require.Contains(t, stderr, "operation not permitted: the file, or the folder that holds it, is read-only or immutable")
	require.Equal(t, before, atomicfstest.Tree(t, r))
	chattr(t, "-i", p)
	code, stdout, stderr := bundlegen(t, r, "bundle", "--regenerate")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "stopped")
	require.Contains(t, stdout, "bundle/inferencestack-operator/2.0.0: regenerated, valid")
	require.NotContains(t, readFile(t, p), "# an edit")
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(data)
}

// TestSignalStopsARun: SIGTERM to a run that waits on the network (pin
// --resolve against a registry that accepts the connection and never
// answers) ends it with exit code 1 and the cause, and nothing is written.
// The signal is sent once the registry saw the connection: no sleep.
func TestSignalStopsARun(t *testing.T) {
	r := repoCopy(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	connected := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			connected <- c // held open, never answered
		}
	}()
	in := filepath.Join(r, "channels/releases/2.0.0.yaml")
	data := strings.ReplaceAll(readFile(t, in), "docker.io/", l.Addr().String()+"/")
	data = strings.ReplaceAll(data, "quay.io/", l.Addr().String()+"/")
	require.NoError(t, os.WriteFile(in, []byte(data), 0o644))
	before := atomicfstest.Tree(t, r)

	cmd := exec.Command(os.Args[0], "pin", "--resolve", "--version", "2.0.0")
	cmd.Dir = r
	cmd.Env = append(os.Environ(), envMain+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case c := <-connected:
		defer c.Close()
	case err := <-exited:
		t.Fatalf("bundlegen ended before it reached the registry: %v\n%s", err, stderr.String())
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err = <-exited
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "bundlegen ended without an error: %s", stderr.String())
	require.Equal(t, 1, ee.ExitCode(), "it must end by itself with exit code 1, not be killed by the signal: %s", stderr.String())
	require.Contains(t, stderr.String(), "terminated signal received")
	require.Equal(t, before, atomicfstest.Tree(t, r))
}
