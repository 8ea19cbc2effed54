// Package gitsource reads the commit an image's input comes from, for the
// SBOM and provenance of `bundlegen sign` and `bundlegen documents`: from
// flags, else from the git checkout that holds the input. Either way the
// input must be exactly that commit's content: no edited, untracked or
// ignored file inside it.
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

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/image"
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
	f.StringVar(&o.Commit, "commit", "", "the git commit the input is built from (default: HEAD); the input must be exactly that commit's content either way")
	f.StringVar(&o.CommitTime, "commit-time", "", "the commit's time, RFC 3339 or Unix seconds (default: the committer date of the commit, from git)")
	f.StringVar(&o.Repository, "source", DefaultRepository, "the source repository the provenance names")
}

// Of is the source of input of kind: the commit of the flags, else HEAD of
// the git checkout holding input, with the input's path relative to the
// checkout (so the documents do not depend on how the path is spelled or
// where bundlegen runs). It refuses, naming the file, an input that is not
// exactly that commit's content: a file edited, untracked or ignored by git
// inside a bundle or catalog folder, and, for the operator binary (built
// from the working tree, and ignored by git), a checkout with any change or
// a commit other than HEAD.
func (o *Flags) Of(kind image.Kind, input string) (image.Source, error) {
	// The reader's guard first: no link, nothing that could block, no
	// half-written tree (before git reads it too).
	if err := atomicfs.CheckInput(input); err != nil {
		return image.Source{}, fmt.Errorf("input %s: %w: name the bundle or catalog folder, or the operator binary, the image is built from", input, err)
	}
	st, err := os.Lstat(input)
	if err != nil {
		return image.Source{}, err
	}
	src := image.Source{Repository: o.Repository, Commit: o.Commit}
	if o.CommitTime != "" {
		t, err := parseTime(o.CommitTime)
		if err != nil {
			return image.Source{}, err
		}
		src.Time = t
	}
	abs, err := filepath.Abs(input)
	if err != nil {
		return image.Source{}, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	dir := abs
	if !st.IsDir() {
		dir = filepath.Dir(abs)
	}
	top, err := git(dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return image.Source{}, fmt.Errorf("%s is not in a git checkout, so nothing can show that it is the content of a commit: "+
			"sign and write documents from the repository's checkout (%w)", input, err)
	}
	if real, err := filepath.EvalSymlinks(top); err == nil {
		top = real
	}
	rel, err := filepath.Rel(top, abs)
	if err != nil {
		return image.Source{}, err
	}
	src.Path = filepath.ToSlash(rel)
	head, err := git(top, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return image.Source{}, err
	}
	if src.Commit == "" {
		src.Commit = head
	} else if len(src.Commit) != 40 && len(src.Commit) != 64 || strings.Trim(strings.ToLower(src.Commit), "0123456789abcdef") != "" {
		return image.Source{}, fmt.Errorf("commit %q is not a full hexadecimal git commit: give the output of `git rev-parse HEAD` (--commit)", src.Commit)
	}
	src.Commit = strings.ToLower(src.Commit)
	if _, err := git(top, "rev-parse", "--verify", "--quiet", src.Commit+"^{commit}"); err != nil {
		return image.Source{}, fmt.Errorf("--commit %s is not a commit of the checkout %s: fetch it, or name the commit %s was built from", src.Commit, top, input)
	}
	if err := exactly(kind, top, src.Path, input, src.Commit, head); err != nil {
		return image.Source{}, err
	}
	if src.Time.IsZero() {
		ct, err := git(top, "show", "-s", "--format=%ct", src.Commit)
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

// exactly refuses an input at rel (relative to the checkout top) that is
// not exactly commit's content.
func exactly(kind image.Kind, top, rel, input, commit, head string) error {
	if kind == image.KindOperator {
		// The binary is built from the working tree (and git ignores it):
		// the tree must be HEAD's, and HEAD the commit named.
		if commit != head {
			return fmt.Errorf("--commit %s is not HEAD (%s): the operator binary %s is built from the working tree, which is HEAD's; "+
				"check out %s and build it again (make image-operator), or leave --commit out", commit, head, input, commit)
		}
		status, err := git(top, "status", "--porcelain", "--untracked-files=all")
		if err != nil {
			return err
		}
		if status != "" {
			return fmt.Errorf("the checkout %s has changes not committed (git status: %s), so the operator binary %s is not built from commit %s: "+
				"commit or remove them, build it again (make image-operator), then retry", top, strings.Split(status, "\n")[0], input, commit)
		}
		return nil
	}
	// Edited, staged, untracked or ignored files inside the input, against HEAD.
	status, err := git(top, "status", "--porcelain", "--ignored=matching", "--untracked-files=all", "--", rel)
	if err != nil {
		return err
	}
	if status != "" {
		return fmt.Errorf("%s holds files that are not commit %s's (git status: %s): edited, untracked or ignored files would be packed and signed as that commit; "+
			"commit or remove them (`git status --ignored %s`), then retry", input, commit, strings.Split(status, "\n")[0], input)
	}
	if commit != head {
		diff, err := git(top, "diff", "--name-only", commit, "--", rel)
		if err != nil {
			return err
		}
		if diff != "" {
			return fmt.Errorf("%s is not commit %s's content (it differs in %s): check out that commit, or name the commit it is (leave --commit out for HEAD)",
				input, commit, strings.Split(diff, "\n")[0])
		}
	}
	return nil
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
		return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
