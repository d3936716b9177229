package algo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"herd/internal/atomicfile"
	"herd/metrics"
)

// Files of a run directory besides ConfigFile and ModelFile.
const (
	MetricsFile = "metrics.csv"
	SummaryFile = "summary.json"
	CurveFile   = "curve.png"
	// EventsFile holds the same scalars for TensorBoard.
	EventsFile = metrics.EventsFile
	// LockFile is held (flock) by the process writing the run; it stays
	// behind, empty of meaning once the process has exited.
	LockFile = ".herd.lock"
	// stagingDir holds the files of the run being written until they are
	// all complete; a run killed with SIGKILL leaves its partial files
	// there, and the next run into the directory clears it.
	stagingDir = ".staging"
	// previousDir holds an earlier run's files while commit replaces them.
	previousDir  = ".previous"
	setAsideMark = ".complete"
)

// RunFiles lists the files that make up a run, in the order a commit moves
// them into place (summary.json, the completion record, last).
func RunFiles() []string {
	return []string{ModelFile, MetricsFile, EventsFile, CurveFile, ConfigFile, SummaryFile}
}

// DirMode says what TrainRun does with an output directory that already
// holds a run (any of RunFiles).
type DirMode int

const (
	// DirNew refuses a directory that holds a run (ErrRunExists).
	DirNew DirMode = iota
	// DirForce replaces the run, but only with a new run whose files were
	// all written (completed, interrupted or diverged): a new run that
	// fails, before or after training, leaves the old one byte-identical
	// and its own partial files in the staging directory.
	DirForce
	// DirResume continues the run from the newest checkpoint in
	// DIR/checkpoints that loads, for an algorithm that can
	// (Spec.Resumable, under the local executor or one with
	// Executor.Resumable); any other run, or a
	// checkpoint of another configuration, fails with ErrCannotResume
	// and leaves the directory as it was.
	DirResume
)

// Errors about run directories.
var (
	// ErrRunExists: the output directory holds a run and neither force
	// nor resume was asked for.
	ErrRunExists = errors.New("algo: the output directory already holds a run")
	// ErrRunLocked: another process is writing the run directory.
	ErrRunLocked = errors.New("algo: the run directory is in use by another process")
	// ErrCannotResume: DirResume was asked for but the run cannot continue.
	ErrCannotResume = errors.New("algo: cannot resume")
)

// runDir is an output directory held for one training run: locked against
// other processes, with the new run's files written into a staging
// directory and moved into place together by commit.
type runDir struct {
	dir, stage string
	lock       *os.File
	made       []string // directories openRunDir created, dir first
	staged     bool     // the staging directory is this run's
	hadRun     bool     // dir held an earlier run (DirForce replaces it)
	mode       DirMode
}

// openRunDir creates (if needed) and locks dir, applies mode to a run
// already there, and prepares an empty staging directory. When it fails
// it removes the directories it created (dir and any missing parents,
// such as runs/), so a refused run leaves nothing behind.
//
// For DirResume, resume (which loads and checks the checkpoint) runs
// once the directory is locked and before anything in it changes; nil
// refuses the resume.
func openRunDir(dir string, mode DirMode, resume func() error) (*runDir, error) {
	made := missingDirs(dir)
	d := &runDir{dir: dir, stage: filepath.Join(dir, stagingDir), made: made, mode: mode}
	fail := func(err error) (*runDir, error) {
		d.abort()
		d.close()
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(fmt.Errorf("algo: %w", err))
	}
	if len(made) > 0 {
		if err := atomicfile.SyncDir(filepath.Dir(made[len(made)-1])); err != nil {
			return fail(err)
		}
	}
	lock, err := lockFile(filepath.Join(dir, LockFile))
	if err != nil {
		if errors.Is(err, errLocked) { // another process's directory: touch nothing
			return nil, fmt.Errorf("%w: %s (%s); wait for it or choose another --out", ErrRunLocked, dir, err)
		}
		return fail(fmt.Errorf("algo: lock %s: %w", dir, err))
	}
	d.lock = lock
	if err := d.recover(); err != nil {
		return fail(err)
	}
	existing := d.existing()
	d.hadRun = len(existing) > 0
	switch {
	case mode == DirResume && len(existing) == 0:
		return fail(fmt.Errorf("%w %s: it holds no run", ErrCannotResume, dir))
	case mode == DirResume && resume == nil:
		return fail(fmt.Errorf("%w %s: this run saves no training state to continue from", ErrCannotResume, dir))
	case mode == DirResume:
		if err := resume(); err != nil {
			return fail(err)
		}
	case mode == DirNew && len(existing) > 0:
		return fail(fmt.Errorf("%w: %s holds %v; use --force to replace it or another --out", ErrRunExists, dir, existing))
	}
	if err := os.RemoveAll(d.stage); err != nil {
		return fail(fmt.Errorf("algo: clear %s: %w", d.stage, err))
	}
	if err := os.Mkdir(d.stage, 0o755); err != nil {
		return fail(fmt.Errorf("algo: %w", err))
	}
	d.staged = true
	return d, nil
}

// missingDirs lists dir and those of its parents that do not exist, dir
// first.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			return out
		}
		out = append(out, d)
		p := filepath.Dir(d)
		if p == d {
			return out
		}
		d = p
	}
}

// FreeRunDir returns dir when it holds no run, else the first of dir-2,
// dir-3, … that holds none. It neither creates nor locks anything, so two
// processes may pick the same name; the lock of the one that opens it
// second refuses it (TrainRun itself moves on to the next name instead).
func FreeRunDir(dir string) string {
	for i := 1; ; i++ {
		c := numberedDir(dir, i)
		if len((&runDir{dir: c}).existing()) == 0 {
			return c
		}
	}
}

// numberedDir is dir for i = 1 and dir-i after it.
func numberedDir(dir string, i int) string {
	if i == 1 {
		return dir
	}
	return fmt.Sprintf("%s-%d", filepath.Clean(dir), i)
}

// openFreeRunDir opens the first of dir, dir-2, dir-3, … that holds no run
// and is not locked by another process.
func openFreeRunDir(dir string) (*runDir, error) {
	for i := 1; ; i++ {
		d, err := openRunDir(numberedDir(dir, i), DirNew, nil)
		if errors.Is(err, ErrRunExists) || errors.Is(err, ErrRunLocked) {
			continue
		}
		return d, err
	}
}

// existing lists the run files present in the directory, and its
// checkpoint directory when that holds anything (a run killed before it
// wrote its files leaves only checkpoints).
func (d *runDir) existing() []string {
	var out []string
	for _, f := range RunFiles() {
		if _, err := os.Lstat(filepath.Join(d.dir, f)); err == nil {
			out = append(out, f)
		}
	}
	if hasCheckpoints(filepath.Join(d.dir, CheckpointDir)) {
		out = append(out, CheckpointDir+"/")
	}
	return out
}

// checkpointDir is where this run writes its checkpoints: in place when
// it continues the directory's run or the directory held none, else (a
// --force run replacing another) in the staging directory, which commit
// moves into place with the other files, so that the earlier run stays
// resumable until the new one replaces it.
func (d *runDir) checkpointDir() string {
	if d.mode == DirResume || !d.hadRun {
		return filepath.Join(d.dir, CheckpointDir)
	}
	return filepath.Join(d.stage, CheckpointDir)
}

// commit moves every staged run file into the directory and removes the
// files of an earlier run that the new one did not produce, so the
// directory never mixes two runs once commit returns. It is all or
// nothing: the earlier run's files are first set aside in previousDir, and
// a failure while the new ones are moved puts them back, so a commit that
// fails leaves the earlier run as it was (the new run's files then stay in
// the staging directory, which the error names). A process killed during
// commit leaves previousDir behind; openRunDir finishes or undoes that
// commit before anything else. Each file is fsynced before its rename and
// the directory after.
func (d *runDir) commit() error {
	prev := filepath.Join(d.dir, previousDir)
	if err := os.RemoveAll(prev); err != nil {
		return fmt.Errorf("algo: commit %s: %w", d.dir, err)
	}
	if err := os.Mkdir(prev, 0o755); err != nil {
		return fmt.Errorf("algo: commit %s: %w", d.dir, err)
	}
	var setAside, moved []string
	undo := func(cause error) error {
		var errs []error
		for _, f := range moved {
			if err := os.Remove(filepath.Join(d.dir, f)); err != nil {
				errs = append(errs, err)
			}
		}
		for _, f := range setAside {
			if err := os.Rename(filepath.Join(prev, f), filepath.Join(d.dir, f)); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == 0 {
			os.RemoveAll(prev)
			atomicfile.SyncDir(d.dir)
			return fmt.Errorf("algo: the new run was not put in place, the earlier run in %s is unchanged (the new run's files are in %s): %w", d.dir, d.stage, cause)
		}
		return fmt.Errorf("algo: the new run was not put in place (%w), and the earlier run could not be restored from %s: %w", cause, prev, errors.Join(errs...))
	}
	for _, f := range RunFiles() {
		if _, err := os.Lstat(filepath.Join(d.dir, f)); err != nil {
			continue
		}
		if err := os.Rename(filepath.Join(d.dir, f), filepath.Join(prev, f)); err != nil {
			return undo(fmt.Errorf("set the earlier run's %s aside: %w", f, err))
		}
		setAside = append(setAside, f)
	}
	// The mark tells recover that the earlier run is wholly set aside.
	if err := atomicfile.WriteFile(filepath.Join(prev, setAsideMark), nil, 0o644); err != nil {
		return undo(err)
	}
	for _, f := range RunFiles() {
		src := filepath.Join(d.stage, f)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := atomicfile.Rename(src, filepath.Join(d.dir, f)); err != nil {
			return undo(fmt.Errorf("%s not put in place: %w", f, err))
		}
		moved = append(moved, f)
	}
	// A --force run's checkpoints replace the earlier run's, last: a
	// failure before here leaves the earlier run resumable.
	if staged := filepath.Join(d.stage, CheckpointDir); hasCheckpoints(staged) {
		dst := filepath.Join(d.dir, CheckpointDir)
		if err := os.RemoveAll(dst); err != nil {
			return fmt.Errorf("algo: commit %s: the earlier run's checkpoints: %w", d.dir, err)
		}
		if err := os.Rename(staged, dst); err != nil {
			return fmt.Errorf("algo: commit %s: the run's checkpoints (left in %s): %w", d.dir, staged, err)
		}
	} else if d.hadRun && d.mode != DirResume {
		// The new run wrote none (it cannot resume): the earlier run's
		// would resume a run that is gone.
		if err := os.RemoveAll(filepath.Join(d.dir, CheckpointDir)); err != nil {
			return fmt.Errorf("algo: commit %s: the earlier run's checkpoints: %w", d.dir, err)
		}
	}
	if err := errors.Join(os.RemoveAll(d.stage), os.RemoveAll(prev), atomicfile.SyncDir(d.dir)); err != nil {
		return fmt.Errorf("algo: commit %s: %w", d.dir, err)
	}
	return nil
}

// recover finishes or undoes a commit that a killed process left halfway.
// Without the set-aside mark the earlier run was being set aside, and its
// files go back. With it, the new run is in place once the staging
// directory holds none of its files, and the earlier run is dropped;
// otherwise the new run's files moved so far are removed and the earlier
// ones put back.
func (d *runDir) recover() error {
	prev := filepath.Join(d.dir, previousDir)
	ents, err := os.ReadDir(prev)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("algo: %w", err)
	}
	_, markErr := os.Stat(filepath.Join(prev, setAsideMark))
	if markErr == nil {
		staged := false
		for _, f := range RunFiles() {
			if _, err := os.Lstat(filepath.Join(d.stage, f)); err == nil {
				staged = true
			}
		}
		if !staged {
			return os.RemoveAll(prev)
		}
		for _, f := range RunFiles() {
			if err := os.Remove(filepath.Join(d.dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("algo: undo an interrupted commit: %w", err)
			}
		}
	}
	for _, e := range ents {
		if e.Name() == setAsideMark {
			continue
		}
		if err := os.Rename(filepath.Join(prev, e.Name()), filepath.Join(d.dir, e.Name())); err != nil {
			return fmt.Errorf("algo: undo an interrupted commit: %w", err)
		}
	}
	return errors.Join(os.RemoveAll(prev), atomicfile.SyncDir(d.dir))
}

// abort drops the staged files. The directories openRunDir created (dir,
// and parents such as runs/) are removed again while they hold nothing
// else: a run that never started leaves no empty directory behind.
func (d *runDir) abort() {
	if d.staged {
		os.RemoveAll(d.stage)
	}
	if len(d.made) == 0 {
		return
	}
	ents, err := os.ReadDir(d.dir)
	if err != nil || slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() != LockFile }) {
		return
	}
	os.Remove(filepath.Join(d.dir, LockFile))
	for _, m := range d.made {
		if os.Remove(m) != nil { // not empty: something else lives there now
			return
		}
	}
}

// close releases the lock.
func (d *runDir) close() {
	if d.lock != nil {
		unlockFile(d.lock)
		d.lock = nil
	}
}

// FinishStaged puts in place the files that a run's process left in dir's
// staging directory when it died without committing them (a learner
// killed with SIGKILL, or one that failed before it opened dir), after add
// has written into the staging directory what that process could not (a
// failed run's summary.json). A staging directory older than since is an
// earlier process's and is cleared first. As with a run that fails under
// TrainRun, an earlier run in dir is never replaced: the files then stay
// in the staging directory. where is the directory that holds them.
func FinishStaged(dir string, since time.Time, add func(stage string) error) (where string, err error) {
	d := &runDir{dir: dir, stage: filepath.Join(dir, stagingDir), made: missingDirs(dir), mode: DirForce}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("algo: %w", err)
	}
	lock, err := lockFile(filepath.Join(dir, LockFile))
	if err != nil {
		return "", fmt.Errorf("algo: lock %s: %w", dir, err)
	}
	d.lock = lock
	defer d.close()
	if err := d.recover(); err != nil {
		return "", err
	}
	if fi, err := os.Stat(d.stage); err == nil && fi.ModTime().Before(since) {
		if err := os.RemoveAll(d.stage); err != nil {
			return "", fmt.Errorf("algo: clear %s: %w", d.stage, err)
		}
	}
	if err := os.MkdirAll(d.stage, 0o755); err != nil {
		return "", fmt.Errorf("algo: %w", err)
	}
	d.staged = true
	if err := add(d.stage); err != nil {
		return d.stage, err
	}
	for _, f := range RunFiles() {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			d.hadRun = true
			return d.stage, nil
		}
	}
	if err := d.commit(); err != nil {
		return d.stage, err
	}
	return dir, nil
}
