// Command catalog (make bench-catalog) compares bundlegen's catalog render with opm's on a
// synthetic package (2,000 bundles over 3 majors and 40 minors by default).
//
// It writes the bundle directories and their semver template into a temporary
// folder laid out as a repository (bundle/, channels/, go.mod), builds the
// bundle images and serves them from an in-process registry on 127.0.0.1,
// then runs, each command as a child process:
//
//   - bin/bundlegen (make bundlegen) as a user runs it in the repository,
//     the two commands of `make catalog`: `bundlegen catalog
//     --verify-bundles=false` (the synthetic bundles have no release
//     inputs to verify against), which renders, validates and writes
//     catalog/bench/catalog.yaml, then `bundlegen validate catalog catalog`;
//   - opm (operator-registry's cmd/opm, the go.mod tool): `opm alpha
//     render-template semver --use-http -o yaml` over the same bundles as
//     images, then `opm validate` of the result.
//
// It prints each tool's wall time (its commands' sum) and peak RSS (the
// highest of its children's, from their rusage), each command's, and
// whether the two catalogs are byte for byte identical. Run it with
// `make bench-catalog`, which builds bin/bundlegen first.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/repo"
	"github.com/inferencestack/inferencestack/test/opmequiv"
	"github.com/inferencestack/inferencestack/test/registry"
)

// pkg is the synthetic package's name.
const pkg = "bench"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-catalog:", err)
		os.Exit(1)
	}
}

type options struct {
	majors, minors, patches int
	bundlegen, opm          string
	keep                    bool
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("bench-catalog", flag.ContinueOnError)
	fs.IntVar(&o.majors, "majors", 3, "major versions")
	fs.IntVar(&o.minors, "minors", 40, "minor versions in all, spread over the majors")
	fs.IntVar(&o.patches, "patches", 50, "patch versions per minor (bundles = minors x patches)")
	fs.StringVar(&o.bundlegen, "bundlegen", "", "bundlegen binary to run (default: bin/bundlegen of the repository, which make bundlegen builds)")
	fs.StringVar(&o.opm, "opm", "", "opm binary to run (default: build the go.mod tool into the work folder)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work folder and print its path")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every input is a flag (-h lists them)", fs.Args())
	}
	return bench(ctx, o, stdout)
}

// bundlegenBinary returns the bundlegen binary to run: path, else
// bin/bundlegen of the repository holding the working folder. It must
// exist: the bench measures the CLI as built, never a build of its own.
func bundlegenBinary(path string) (string, error) {
	if path == "" {
		root, err := repo.Root("")
		if err != nil {
			return "", fmt.Errorf("finding bin/bundlegen: %w: run make bench-catalog in the repository, or give -bundlegen", err)
		}
		path = filepath.Join(root, "bin", "bundlegen")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("no bundlegen binary at %s: build it with make bundlegen (make bench-catalog does), or give -bundlegen PATH", abs)
	}
	return abs, nil
}

// measure is one child run.
type measure struct {
	wall   time.Duration
	maxRSS int64 // KiB
}

func (m *measure) add(n measure) {
	m.wall += n.wall
	m.maxRSS = max(m.maxRSS, n.maxRSS)
}

// child is a command to run and measure: in dir (empty: the working
// folder), with env, stdout to out (nil: discarded).
type child struct {
	dir  string
	env  []string
	out  io.Writer
	name string
	args []string
}

func (c child) String() string { return filepath.Base(c.name) + " " + strings.Join(c.args, " ") }

// run runs the command and measures its wall time and peak RSS (the
// child's rusage); stderr is kept for the error.
func (c child) run(ctx context.Context) (measure, error) {
	cmd := exec.CommandContext(ctx, c.name, c.args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.Stdout = c.out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	m := measure{wall: time.Since(start)}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			m.maxRSS = ru.Maxrss // KiB on Linux
		}
	}
	if err != nil {
		return m, fmt.Errorf("%s (in %s): %w\n%s", c, cmp.Or(c.dir, "."), err, tail(stderr.String(), 2000))
	}
	if m.maxRSS == 0 {
		return m, fmt.Errorf("%s: no peak RSS in the child's rusage", c)
	}
	return m, nil
}

// step is one measured command of a tool.
type step struct {
	what string
	measure
}

// runAll runs the commands one after the other and returns each one's
// measure and their total: wall times summed, the highest peak RSS.
func runAll(ctx context.Context, children ...child) ([]step, measure, error) {
	var steps []step
	var total measure
	for _, c := range children {
		m, err := c.run(ctx)
		if err != nil {
			return nil, total, err
		}
		steps = append(steps, step{what: c.String(), measure: m})
		total.add(m)
	}
	return steps, total, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func bench(ctx context.Context, o options, stdout io.Writer) error {
	bundlegen, err := bundlegenBinary(o.bundlegen)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "bench-catalog-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(stdout, "work folder:", work)
	} else {
		defer os.RemoveAll(work)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

	opm := o.opm
	if opm == "" {
		opm = filepath.Join(work, "bin", "opm")
		logf("building opm (operator-registry cmd/opm, the go.mod tool) ...")
		build := exec.CommandContext(ctx, "go", "build", "-tags", "containers_image_openpgp", "-o", opm,
			"github.com/operator-framework/operator-registry/cmd/opm")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building opm: %w", err)
		}
	}

	reg := registry.Start()
	defer reg.Close()
	s := opmequiv.Synthetic{Package: pkg, Majors: o.majors, Minors: o.minors, Patches: o.patches}
	start := time.Now()
	l, err := s.Write(filepath.Join(work, "repo"), reg.Host()+"/bench/{{.Package}}-bundle:v{{.Version}}")
	if err != nil {
		return err
	}
	// bundlegen finds the repository root, which its default paths are
	// relative to, by go.mod beside channels/.
	if err := os.WriteFile(filepath.Join(l.Root, "go.mod"), []byte("module example.com/bench\n"), 0o644); err != nil {
		return err
	}
	logf("wrote %d bundle directories in %s; pushing their images to %s ...", len(l.Dirs), time.Since(start).Round(time.Millisecond), reg.Host())
	start = time.Now()
	if err := opmequiv.PushBundles(ctx, l.Dirs, l.Refs); err != nil {
		return err
	}
	pushed := time.Since(start)
	imageTemplate, err := l.ImageTemplate()
	if err != nil {
		return err
	}
	opmTemplate := filepath.Join(work, "opm.semver.yaml")
	if err := os.WriteFile(opmTemplate, imageTemplate, 0o644); err != nil {
		return err
	}

	// bundlegen: the commands of `make catalog`, in the repository.
	logf("rendering and validating with %s ...", bundlegen)
	bgSteps, bg, err := runAll(ctx,
		child{dir: l.Root, env: os.Environ(), name: bundlegen, args: []string{"catalog", "--verify-bundles=false"}},
		child{dir: l.Root, env: os.Environ(), name: bundlegen, args: []string{"validate", "catalog", "catalog"}},
	)
	if err != nil {
		return err
	}
	bundlegenOut := filepath.Join(l.Root, "catalog", pkg, fbc.CatalogFile)

	// opm: a private HOME whose containers config accepts unsigned images and
	// marks the loopback registry insecure.
	home := filepath.Join(work, "home")
	if _, _, err := opmequiv.WriteContainersConfig(home, reg.Host()); err != nil {
		return err
	}
	env := append(withoutEnv(os.Environ(), "HOME", "XDG_CONFIG_HOME", "OLM_CACHE_DIR", "REGISTRY_AUTH_FILE"), "HOME="+home)
	opmOut := filepath.Join(work, "opm", pkg, fbc.CatalogFile)
	if err := os.MkdirAll(filepath.Dir(opmOut), 0o755); err != nil {
		return err
	}
	f, err := os.Create(opmOut)
	if err != nil {
		return err
	}
	logf("rendering with opm alpha render-template semver (pulls every bundle image), then opm validate ...")
	opmSteps, om, err := runAll(ctx,
		child{env: env, out: f, name: opm, args: []string{"alpha", "render-template", "semver", "--use-http", "-o", "yaml", opmTemplate}},
		child{env: env, name: opm, args: []string{"validate", filepath.Dir(filepath.Dir(opmOut))}},
	)
	f.Close()
	if err != nil {
		return err
	}

	a, err := os.ReadFile(bundlegenOut)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(opmOut)
	if err != nil {
		return err
	}
	identical := bytes.Equal(a, b)

	fmt.Fprintf(stdout, "catalog: %d bundles, %d majors, %d minors (%d bytes of YAML); images pushed in %s\n",
		len(l.Dirs), o.majors, o.minors, len(a), pushed.Round(time.Millisecond))
	fmt.Fprintf(stdout, "%-10s %12s %14s\n", "", "wall", "peak RSS")
	row := func(name string, m measure, what string) {
		fmt.Fprintf(stdout, "%-10s %12s %11d MiB   %s\n", name, m.wall.Round(time.Millisecond), m.maxRSS/1024, what)
	}
	row("bundlegen", bg, "bin/bundlegen over the bundle directories:")
	for _, st := range bgSteps {
		row("", st.measure, st.what)
	}
	row("opm", om, "opm over the bundle images (pulled from the registry):")
	for _, st := range opmSteps {
		row("", st.measure, strings.ReplaceAll(st.what, work+string(filepath.Separator), ""))
	}
	fmt.Fprintf(stdout, "speed-up:  %.1fx\n", om.wall.Seconds()/bg.wall.Seconds())
	fmt.Fprintf(stdout, "identical: %t\n", identical)
	if !identical {
		return errors.New("the catalogs differ: rerun with -keep and diff repo/catalog/bench/catalog.yaml opm/bench/catalog.yaml in the work folder")
	}
	return nil
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}
