// Command catalog (make bench-catalog) compares bundlegen's catalog render with opm's on a
// synthetic package (2,000 bundles over 3 majors and 40 minors by default).
//
// It writes the bundle directories and their semver template into a temporary
// folder, builds the bundle images and serves them from an in-process
// registry on 127.0.0.1, then runs, each as a child process:
//
//   - bundlegen: fbc.Catalog (semver template over the bundle directories),
//     validate.CatalogConfig, and the catalog written as YAML;
//   - opm (operator-registry's cmd/opm, the go.mod tool): `opm alpha
//     render-template semver --use-http -o yaml` over the same bundles as
//     images, then `opm validate` of the result.
//
// It prints both wall times, both peak RSS figures (rusage of the children)
// and whether the two catalogs are byte for byte identical. Run it with
// `make bench-catalog`.
package main

import (
	"bytes"
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
	"github.com/inferencestack/inferencestack/internal/validate"
	"github.com/inferencestack/inferencestack/test/opmequiv"
	"github.com/inferencestack/inferencestack/test/registry"
)

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
	opm                     string
	keep                    bool
	// child mode: render with bundlegen's code and write the catalog.
	renderTemplate, renderRoot, renderOut string
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("bench-catalog", flag.ContinueOnError)
	fs.IntVar(&o.majors, "majors", 3, "major versions")
	fs.IntVar(&o.minors, "minors", 40, "minor versions in all, spread over the majors")
	fs.IntVar(&o.patches, "patches", 50, "patch versions per minor (bundles = minors x patches)")
	fs.StringVar(&o.opm, "opm", "", "opm binary to run (default: build the go.mod tool into the work folder)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work folder and print its path")
	fs.StringVar(&o.renderTemplate, "bundlegen-render", "", "internal: render this semver template with bundlegen's code")
	fs.StringVar(&o.renderRoot, "bundlegen-root", "", "internal: repository root of -bundlegen-render")
	fs.StringVar(&o.renderOut, "bundlegen-out", "", "internal: catalog file written by -bundlegen-render")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.renderTemplate != "" {
		return renderBundlegen(ctx, o.renderTemplate, o.renderRoot, o.renderOut)
	}
	return bench(ctx, o, stdout)
}

// renderBundlegen is the bundlegen side, run in a child process so that its
// peak RSS is measured alone.
func renderBundlegen(ctx context.Context, template, root, out string) error {
	cfg, err := fbc.Catalog{Template: template, Root: root}.Run(ctx)
	if err != nil {
		return err
	}
	if findings := validate.CatalogConfig(*cfg, false); len(findings) > 0 {
		var b strings.Builder
		for _, f := range findings {
			fmt.Fprintf(&b, "\n  %s", f)
		}
		return fmt.Errorf("bundlegen validation found %d problems:%s", len(findings), b.String())
	}
	data, err := fbc.Marshal(*cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(out, data, 0o644)
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

// runChild runs a command and measures its wall time and peak RSS; stdout
// goes to out (if not nil), stderr is kept for the error.
func runChild(ctx context.Context, out io.Writer, env []string, name string, args ...string) (measure, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = env
	start := time.Now()
	err := cmd.Run()
	m := measure{wall: time.Since(start)}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			m.maxRSS = ru.Maxrss // KiB on Linux
		}
	}
	if err != nil {
		return m, fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return m, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func bench(ctx context.Context, o options, stdout io.Writer) error {
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
	s := opmequiv.Synthetic{Package: "bench", Majors: o.majors, Minors: o.minors, Patches: o.patches}
	start := time.Now()
	l, err := s.Write(filepath.Join(work, "repo"), reg.Host()+"/bench/{{.Package}}-bundle:v{{.Version}}")
	if err != nil {
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

	// bundlegen: this program again, in its child mode.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bundlegenOut := filepath.Join(work, "bundlegen", "bench", "catalog.yaml")
	if err := os.MkdirAll(filepath.Dir(bundlegenOut), 0o755); err != nil {
		return err
	}
	logf("rendering and validating with bundlegen ...")
	bg, err := runChild(ctx, nil, os.Environ(), self,
		"-bundlegen-render", l.Template, "-bundlegen-root", l.Root, "-bundlegen-out", bundlegenOut)
	if err != nil {
		return err
	}

	// opm: a private HOME whose containers config accepts unsigned images and
	// marks the loopback registry insecure.
	home := filepath.Join(work, "home")
	if _, _, err := opmequiv.WriteContainersConfig(home, reg.Host()); err != nil {
		return err
	}
	env := append(withoutEnv(os.Environ(), "HOME", "XDG_CONFIG_HOME", "OLM_CACHE_DIR", "REGISTRY_AUTH_FILE"), "HOME="+home)
	opmOut := filepath.Join(work, "opm", "bench", "catalog.yaml")
	if err := os.MkdirAll(filepath.Dir(opmOut), 0o755); err != nil {
		return err
	}
	f, err := os.Create(opmOut)
	if err != nil {
		return err
	}
	logf("rendering with opm alpha render-template semver (pulls every bundle image) ...")
	var om measure
	m, err := runChild(ctx, f, env, opm, "alpha", "render-template", "semver", "--use-http", "-o", "yaml", opmTemplate)
	f.Close()
	if err != nil {
		return err
	}
	om.add(m)
	logf("validating with opm validate ...")
	m, err = runChild(ctx, nil, env, opm, "validate", filepath.Dir(filepath.Dir(opmOut)))
	if err != nil {
		return err
	}
	om.add(m)

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
	fmt.Fprintf(stdout, "%-10s %12s %11d MiB   render + validate, bundle directories\n", "bundlegen", bg.wall.Round(time.Millisecond), bg.maxRSS/1024)
	fmt.Fprintf(stdout, "%-10s %12s %11d MiB   render-template semver (image pulls) + validate\n", "opm", om.wall.Round(time.Millisecond), om.maxRSS/1024)
	fmt.Fprintf(stdout, "speed-up:  %.1fx\n", om.wall.Seconds()/bg.wall.Seconds())
	fmt.Fprintf(stdout, "identical: %t\n", identical)
	if !identical {
		return errors.New("the catalogs differ: rerun with -keep and diff bundlegen/bench/catalog.yaml opm/bench/catalog.yaml in the work folder")
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
