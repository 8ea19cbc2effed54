// Package gitsource reads the commit an image's input comes from, for the
// SBOM and provenance of `bundlegen sign` and `bundlegen documents`: from
// flags, else from the git checkout that holds the input.
package gitsource

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/internal/repo"
)

// DefaultRepository is the repository the provenance names unless --source
// says otherwise.
const DefaultRepository = "https://github.com/inferencestack/inferencestack"

// Flags are --commit, --commit-time and --source.
type Flags struct {
	Commit     string
	CommitTime string
	Repository string
}

// Register adds the flags to f.
func (o *Flags) Register(f *pflag.FlagSet) {
	f.StringVar(&o.Commit, "commit", "", "the git commit the input is built from (default: HEAD, refused when the input has uncommitted changes)")
	f.StringVar(&o.CommitTime, "commit-time", "", "the commit's time, RFC 3339 or Unix seconds (default: the committer date of the commit, from git)")
	f.StringVar(&o.Repository, "source", DefaultRepository, "the source repository the provenance names")
}

// Of is the source of input: the flags, else HEAD of the git checkout
// holding it (refused when input has uncommitted changes).
func (o *Flags) Of(input string) (image.Source, error) {
	if _, err := os.Stat(input); err != nil {
		return image.Source{}, fmt.Errorf("input %s: %w: name the bundle or catalog folder, or the operator binary, the image is built from", input, err)
	}
	src := image.Source{Repository: o.Repository, Commit: o.Commit}
	if o.CommitTime != "" {
		t, err := parseTime(o.CommitTime)
		if err != nil {
			return image.Source{}, err
		}
		src.Time = t
	}
	if src.Commit != "" && !src.Time.IsZero() {
		return src, src.Check()
	}
	root, err := repo.Root(filepath.Dir(input))
	if err != nil {
		root, err = repo.Root("")
	}
	if err != nil {
		return image.Source{}, fmt.Errorf("%w: give --commit and --commit-time, or sign from inside the repository's git checkout", err)
	}
	if src.Commit == "" {
		head, err := git(root, "rev-parse", "HEAD")
		if err != nil {
			return image.Source{}, err
		}
		abs, err := filepath.Abs(input)
		if err != nil {
			return image.Source{}, err
		}
		status, err := git(root, "status", "--porcelain", "--", abs)
		if err != nil {
			return image.Source{}, err
		}
		if status != "" {
			return image.Source{}, fmt.Errorf("%s has changes not committed (git status: %s): commit them first, or give --commit and --commit-time", input, strings.Split(status, "\n")[0])
		}
		src.Commit = head
	}
	if src.Time.IsZero() {
		ct, err := git(root, "show", "-s", "--format=%ct", src.Commit)
		if err != nil {
			return image.Source{}, err
		}
		t, err := parseTime(ct)
		if err != nil {
			return image.Source{}, err
		}
		src.Time = t
	}
	return src, src.Check()
}

func parseTime(s string) (time.Time, error) {
	if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(sec, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--commit-time %q: want RFC 3339 (2026-11-25T12:00:00Z) or Unix seconds", s)
	}
	return t.UTC(), nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w: %s (give --commit and --commit-time instead)", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
