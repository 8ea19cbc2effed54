package atomicfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// JournalDir is the folder, directly inside the root a transaction writes
// under (bundle/, catalog/), that holds its journal while it runs. No other
// entry of the tree is reserved: staged and backup files sit beside their
// targets under names that embed the run's random id, and the journal lists
// each of them, so a recovery removes exactly what the stopped run made.
const JournalDir = ".bundlegen"

// journalFile is the journal's name in JournalDir.
const journalFile = "journal"

// journalMagic starts every journal: a file without it is not bundlegen's,
// and is never read as a journal, changed or removed.
const journalMagic = "bundlegen transaction journal v1\n"

// Journal states.
const (
	// statePrepare: staged files and backups are being made; a recovery
	// removes them, and the targets are as they were.
	statePrepare = "prepare"
	// stateCommit: every staged file and backup is complete on disk; a
	// recovery renames the remaining staged files over their targets.
	stateCommit = "commit"
)

// More steps a Hook is called with, by Tx.Commit.
const (
	// StepJournal comes before the journal is written (or moves to commit).
	StepJournal = "journal"
	// StepBackup comes before a replaced file is hard-linked to its backup.
	StepBackup = "backup"
	// StepCommit comes before the journal records the commit point.
	StepCommit = "commit"
)

// Tx writes a set of files all or nothing. Begin locks the root and
// recovers what a stopped run left; Write records each file; Commit checks
// every target (no link, no special file, a folder for each parent), stages
// each new content beside its target, records them in the journal, then
// renames them over their targets one by one. Every other file, in those
// folders or elsewhere, is left as it is: a file a user saves meanwhile
// stays. When Commit fails, the targets are put back as they were; when the
// process is killed, the next Begin (or Recover) on the same root finishes
// the write if it had reached the commit point and undoes it if not.
type Tx struct {
	ctx    context.Context
	root   string
	files  map[string][]byte
	unlock func()
}

// journal is the JSON after journalMagic. Paths are relative to the root.
type journal struct {
	State string         `json:"state"`
	Run   string         `json:"run"`
	Files []journalEntry `json:"files"`
	// Dirs are the folders the run creates, parents first.
	Dirs []string `json:"dirs,omitempty"`
}

type journalEntry struct {
	Target string `json:"target"`
	Staged string `json:"staged"`
	// SHA256 is the staged content's: a recovery touches a staged file
	// only when it still holds it.
	SHA256 string `json:"sha256"`
	// Backup is a hard link to the replaced target (empty for a new file);
	// Dev and Ino identify that file.
	Backup string `json:"backup,omitempty"`
	Dev    uint64 `json:"dev,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
}

// Begin starts a transaction that writes under root, creating root if it
// is missing. It waits for another run that holds root, then recovers what a
// stopped run left there. Close releases it.
func Begin(ctx context.Context, root string) (*Tx, error) {
	root = filepath.Clean(root)
	if err := checkRoot(root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, describe(fmt.Errorf("creating %s: %w", root, err))
	}
	unlock, err := lock(root)
	if err != nil {
		return nil, describe(err)
	}
	if err := recoverLocked(root); err != nil {
		unlock()
		return nil, err
	}
	return &Tx{ctx: ctx, root: root, files: map[string][]byte{}, unlock: unlock}, nil
}

// Write records that path gets data (mode 0644) at Commit. A later Write to
// the same path replaces the earlier one.
func (tx *Tx) Write(path string, data []byte) {
	tx.files[filepath.Clean(path)] = data
}

// Close releases the root. A transaction not committed writes nothing.
func (tx *Tx) Close() {
	if tx.unlock != nil {
		tx.unlock()
		tx.unlock = nil
	}
}

// Commit writes every recorded file, all or nothing (see Tx).
func (tx *Tx) Commit() (err error) {
	if len(tx.files) == 0 {
		return nil
	}
	targets := slices.Sorted(func(yield func(string) bool) {
		for p := range tx.files {
			if !yield(p) {
				return
			}
		}
	})
	var dirs []string
	for _, t := range targets {
		d, err := checkTarget(tx.root, t)
		if err != nil {
			return err
		}
		for _, x := range d {
			if !slices.Contains(dirs, x) {
				dirs = append(dirs, x)
			}
		}
	}
	slices.SortFunc(dirs, func(a, b string) int {
		return strings.Count(a, string(filepath.Separator)) - strings.Count(b, string(filepath.Separator))
	})

	j := journal{State: statePrepare}
	for {
		if j.Run, err = runID(); err != nil {
			return err
		}
		if free(tx.root, targets, j.Run) {
			break
		}
	}
	for _, d := range dirs {
		j.Dirs = append(j.Dirs, tx.rel(d))
	}
	for _, t := range targets {
		sum := sha256.Sum256(tx.files[t])
		e := journalEntry{Target: tx.rel(t), Staged: tx.rel(stagedName(t, j.Run)), SHA256: hex.EncodeToString(sum[:])}
		if st, err := os.Lstat(t); err == nil {
			e.Backup = tx.rel(backupName(t, j.Run))
			e.Dev, e.Ino = devIno(st)
		}
		j.Files = append(j.Files, e)
	}

	step(tx.ctx, tx.root, StepJournal)
	if err := writeJournal(tx.root, j); err != nil {
		return err
	}
	// From here on a failure undoes what this run made, exactly as a
	// recovery would, and reports the first error.
	defer func() {
		if err != nil {
			if rerr := rollBack(tx.root, j); rerr != nil {
				err = fmt.Errorf("%w; and undoing the write: %w (the journal %s says what is left)", err, rerr, filepath.Join(tx.root, JournalDir, journalFile))
				return
			}
			if rerr := removeJournal(tx.root); rerr != nil {
				err = fmt.Errorf("%w; and removing the journal: %w", err, rerr)
			}
		}
	}()
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return describe(fmt.Errorf("creating %s: %w", d, err))
		}
	}
	for i, t := range targets {
		step(tx.ctx, t, StepStage)
		// Until the commit point a cancelled run (SIGINT, SIGTERM) stops
		// and undoes what it wrote.
		if err := tx.ctx.Err(); err != nil {
			return fmt.Errorf("writing %s: %w", t, err)
		}
		if err := writeNew(tx.abs(j.Files[i].Staged), tx.files[t]); err != nil {
			return describe(fmt.Errorf("writing %s: %w", t, err))
		}
	}
	for i, t := range targets {
		if j.Files[i].Backup == "" {
			continue
		}
		step(tx.ctx, t, StepBackup)
		if err := os.Link(t, tx.abs(j.Files[i].Backup)); err != nil {
			return describe(fmt.Errorf("replacing %s: %w", t, err))
		}
	}
	if err := syncDirs(tx.root, j); err != nil {
		return err
	}
	step(tx.ctx, tx.root, StepCommit)
	if err := tx.ctx.Err(); err != nil {
		return fmt.Errorf("writing under %s: %w", tx.root, err)
	}
	j.State = stateCommit
	if err := writeJournal(tx.root, j); err != nil {
		return err
	}
	// The commit point: from here a kill makes the next run finish.
	for i, t := range targets {
		step(tx.ctx, t, StepRename)
		if err := os.Rename(tx.abs(j.Files[i].Staged), t); err != nil {
			return describe(fmt.Errorf("replacing %s: %w", t, err))
		}
	}
	if err := syncDirs(tx.root, j); err != nil {
		return err
	}
	if err := finish(tx.ctx, tx.root, j); err != nil {
		return err
	}
	step(tx.ctx, tx.root, StepDone)
	return nil
}

// Recover finishes or undoes what a run stopped while writing under root
// left behind, as the next Begin would. It does nothing when root has no
// journal.
func Recover(root string) error {
	root = filepath.Clean(root)
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := checkRoot(root); err != nil {
		return err
	}
	unlock, err := lock(root)
	if err != nil {
		return describe(err)
	}
	defer unlock()
	return recoverLocked(root)
}

// Pending fails, naming the journal and what to do, when a run that was
// stopped while writing under root left it to be finished (or a run is
// writing there right now). Verbs that only read root call it, so they never
// read a half-written tree; verb names the verb that writes root ("" when
// unknown).
func Pending(root string, verb string) error {
	dir := filepath.Join(root, JournalDir)
	if _, err := os.Lstat(dir); err != nil {
		return nil
	}
	p := filepath.Join(dir, journalFile)
	if _, err := os.Lstat(p); err != nil {
		p = dir
	}
	what := "the bundlegen verb that wrote it"
	if verb != "" {
		what = "`bundlegen " + verb + "`"
	}
	return fmt.Errorf("%s was being written by a bundlegen run that was stopped, or is being written now (its journal %s is there): "+
		"run %s again, which finishes or undoes that write first, then retry", root, p, what)
}

func recoverLocked(root string) error {
	j, ok, err := readJournal(root)
	if err != nil {
		return err
	}
	if !ok {
		// A run killed while it wrote its first journal leaves only the
		// journal's temporary file.
		return removeJournal(root)
	}
	switch j.State {
	case statePrepare:
		err = rollBack(root, j)
	case stateCommit:
		err = rollForward(root, j)
	default:
		err = fmt.Errorf("unknown state %q", j.State)
	}
	if err != nil {
		return fmt.Errorf("%s: finishing the write of a bundlegen run that was stopped: %w", filepath.Join(root, JournalDir, journalFile), err)
	}
	return removeJournal(root)
}

// rollForward renames the staged files that are still there over their
// targets, then removes the backups.
func rollForward(root string, j journal) error {
	tx := &Tx{root: root}
	for _, e := range j.Files {
		staged := tx.abs(e.Staged)
		if !holds(staged, e.SHA256) {
			continue // renamed already
		}
		if err := os.Rename(staged, tx.abs(e.Target)); err != nil {
			return describe(err)
		}
	}
	if err := syncDirs(root, j); err != nil {
		return err
	}
	return finish(context.Background(), root, j)
}

// rollBack puts every target back as it was before j's run: backups return,
// new targets the run renamed go, staged files and created folders go.
func rollBack(root string, j journal) error {
	tx := &Tx{root: root}
	var errs []error
	for _, e := range j.Files {
		target, staged := tx.abs(e.Target), tx.abs(e.Staged)
		stagedThere := holds(staged, e.SHA256)
		switch {
		case e.Backup != "" && isInode(tx.abs(e.Backup), e.Dev, e.Ino):
			// The backup is the old target. When the target was never
			// replaced it is the same file (rename would do nothing).
			if isInode(target, e.Dev, e.Ino) {
				if err := os.Remove(tx.abs(e.Backup)); err != nil {
					errs = append(errs, err)
				}
			} else if err := os.Rename(tx.abs(e.Backup), target); err != nil {
				errs = append(errs, err)
			}
		case e.Backup == "" && !stagedThere && holds(target, e.SHA256):
			// A new file this run renamed into place.
			if err := os.Remove(target); err != nil {
				errs = append(errs, err)
			}
		}
		if stagedThere {
			if err := os.Remove(staged); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, d := range slices.Backward(j.Dirs) {
		// Only when empty: a folder a user filled meanwhile stays.
		_ = os.Remove(tx.abs(d))
	}
	return describe(errors.Join(errs...))
}

// finish removes the backups of a write that is complete, and the journal.
func finish(ctx context.Context, root string, j journal) error {
	tx := &Tx{root: root}
	for _, e := range j.Files {
		if e.Backup == "" {
			continue
		}
		step(ctx, tx.abs(e.Target), StepRemoveOld)
		b := tx.abs(e.Backup)
		if isInode(b, e.Dev, e.Ino) {
			if err := os.Remove(b); err != nil {
				return describe(err)
			}
		}
	}
	return removeJournal(root)
}

func (tx *Tx) rel(p string) string {
	r, err := filepath.Rel(tx.root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

func (tx *Tx) abs(p string) string {
	p = filepath.FromSlash(p)
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(tx.root, p)
}

func stagedName(target, run string) string {
	return filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+infix+run)
}

func backupName(target, run string) string {
	return filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+infix+run+"-old")
}

// free reports whether no staged or backup name of run exists yet.
func free(root string, targets []string, run string) bool {
	for _, t := range targets {
		for _, p := range []string{stagedName(t, run), backupName(t, run)} {
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				return false
			}
		}
	}
	return true
}

func runID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// checkRoot refuses a root that is a link or not a folder.
func checkRoot(root string) error {
	st, err := os.Lstat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return describe(err)
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: bundlegen writes only inside the tree and never follows a link; replace the link with a folder", root)
	case !st.IsDir():
		return fmt.Errorf("%s is a %s, not a folder: move it away", root, kind(st.Mode()))
	}
	return nil
}

// checkTarget refuses a target that is not a regular file (when it exists),
// or whose folders below root (its parent, for a target outside root) are
// links or not folders. It returns the folders to create, parents first.
func checkTarget(root, target string) ([]string, error) {
	if st, err := os.Lstat(target); err == nil {
		if !st.Mode().IsRegular() {
			return nil, refusal(target, st.Mode())
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, describe(err)
	}
	stop := root
	if !Within(target, root) {
		stop = filepath.Dir(filepath.Dir(target))
	}
	var missing []string
	for d := filepath.Dir(target); d != stop && d != filepath.Dir(d); d = filepath.Dir(d) {
		st, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, d)
		case err != nil:
			return nil, describe(err)
		case !st.IsDir():
			return nil, refusal(d, st.Mode())
		}
	}
	slices.Reverse(missing)
	return missing, nil
}

// Within reports whether p is dir or inside it (lexically).
func Within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// writeNew creates path (it must not exist), writes data and flushes it.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil { // whatever the umask
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeJournal(root string, j journal) error {
	dir := filepath.Join(root, JournalDir)
	if st, err := os.Lstat(dir); err == nil && !st.IsDir() {
		return fmt.Errorf("%s is a %s, not bundlegen's journal folder: move it away", dir, kind(st.Mode()))
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return describe(fmt.Errorf("creating the journal folder %s: %w", dir, err))
	}
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, journalFile)
	if _, ok, err := readJournal(root); err != nil {
		return err
	} else if !ok {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%s is not a bundlegen journal: move it away", path)
		}
	}
	tmp := filepath.Join(dir, journalFile+"."+j.Run+"."+j.State)
	if err := writeNew(tmp, append([]byte(journalMagic), data...)); err != nil {
		return describe(fmt.Errorf("writing the journal %s: %w", path, err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return describe(fmt.Errorf("writing the journal %s: %w", path, err))
	}
	return syncPath(dir)
}

// readJournal reads root's journal; ok is false when there is none. A file
// in its place without the magic header is an error, never removed.
func readJournal(root string) (journal, bool, error) {
	dir := filepath.Join(root, JournalDir)
	if st, err := os.Lstat(dir); err == nil && !st.IsDir() {
		return journal{}, false, fmt.Errorf("%s is a %s, not bundlegen's journal folder: move it away", dir, kind(st.Mode()))
	}
	path := filepath.Join(dir, journalFile)
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return journal{}, false, nil
	}
	if err != nil {
		return journal{}, false, describe(err)
	}
	if !st.Mode().IsRegular() {
		return journal{}, false, refusal(path, st.Mode())
	}
	data, err := ReadFile(path)
	if err != nil {
		return journal{}, false, err
	}
	body, ok := bytes.CutPrefix(data, []byte(journalMagic))
	if !ok {
		return journal{}, false, fmt.Errorf("%s is not a bundlegen journal (it does not start with %q): bundlegen keeps that folder for its journal; move the file away", path, strings.TrimSpace(journalMagic))
	}
	var j journal
	if err := json.Unmarshal(body, &j); err != nil {
		return journal{}, false, fmt.Errorf("%s: a damaged bundlegen journal: %w; check the files it names by hand, then delete it", path, err)
	}
	return j, true, nil
}

// removeJournal removes the journal, the journal's temporary files of this
// scheme (they start with the magic header), and the folder when empty.
func removeJournal(root string) error {
	dir := filepath.Join(root, JournalDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return describe(err)
	}
	for _, e := range entries {
		if e.Name() != journalFile && !strings.HasPrefix(e.Name(), journalFile+".") || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if data, err := ReadFile(p); err == nil && bytes.HasPrefix(data, []byte(journalMagic)) {
			if err := os.Remove(p); err != nil {
				return describe(err)
			}
		}
	}
	_ = os.Remove(dir) // only when empty
	return syncPath(root)
}

// syncDirs flushes the folders of j's targets and the root.
func syncDirs(root string, j journal) error {
	tx := &Tx{root: root}
	seen := map[string]bool{}
	for _, e := range j.Files {
		d := filepath.Dir(tx.abs(e.Target))
		if seen[d] {
			continue
		}
		seen[d] = true
		if err := syncPath(d); err != nil {
			return describe(err)
		}
	}
	return nil
}

// holds reports whether path is a regular file with content of that SHA-256.
func holds(path, sum string) bool {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	data, err := ReadFile(path)
	if err != nil {
		return false
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:]) == sum
}

func isInode(path string, dev, ino uint64) bool {
	st, err := os.Lstat(path)
	if err != nil {
		return false
	}
	d, i := devIno(st)
	return d == dev && i == ino
}
