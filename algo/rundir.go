package algo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

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
	// DirForce replaces the run, but only once the new one has trained:
	// a new run that fails before training leaves the old one untouched.
	DirForce
	// DirResume continues the run from its checkpoint. No algorithm can
	// today (checkpoints hold the weights only, not the optimizer state,
	// the replay buffer or the random streams), so it fails with
	// ErrCannotResume.
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
	created    bool // dir did not exist before openRunDir
}

// openRunDir creates (if needed) and locks dir, applies mode to a run
// already there, and prepares an empty staging directory.
func openRunDir(dir string, mode DirMode) (*runDir, error) {
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("algo: %w", err)
	}
	if created {
		if err := atomicfile.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, err
		}
	}
	lock, err := lockFile(filepath.Join(dir, LockFile))
	if err != nil {
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("%w: %s (%s); wait for it or choose another --out", ErrRunLocked, dir, err)
		}
		return nil, fmt.Errorf("algo: lock %s: %w", dir, err)
	}
	d := &runDir{dir: dir, stage: filepath.Join(dir, stagingDir), lock: lock, created: created}
	existing := d.existing()
	switch {
	case mode == DirResume && len(existing) == 0:
		d.close()
		return nil, fmt.Errorf("%w %s: it holds no run", ErrCannotResume, dir)
	case mode == DirResume:
		d.close()
		return nil, fmt.Errorf("%w %s: herd checkpoints hold the weights only (no optimizer state, replay buffer or random streams), "+
			"so no algorithm can continue a run where it stopped; use --force to train it again from scratch, or another --out", ErrCannotResume, dir)
	case mode == DirNew && len(existing) > 0:
		d.close()
		return nil, fmt.Errorf("%w: %s holds %v; use --force to replace it or another --out", ErrRunExists, dir, existing)
	}
	if err := os.RemoveAll(d.stage); err != nil {
		d.close()
		return nil, fmt.Errorf("algo: clear %s: %w", d.stage, err)
	}
	if err := os.Mkdir(d.stage, 0o755); err != nil {
		d.close()
		return nil, fmt.Errorf("algo: %w", err)
	}
	return d, nil
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
		d, err := openRunDir(numberedDir(dir, i), DirNew)
		if errors.Is(err, ErrRunExists) || errors.Is(err, ErrRunLocked) {
			continue
		}
		return d, err
	}
}

// existing lists the run files present in the directory.
func (d *runDir) existing() []string {
	var out []string
	for _, f := range RunFiles() {
		if _, err := os.Lstat(filepath.Join(d.dir, f)); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// commit moves every staged run file into the directory and removes the
// files of an earlier run that the new one did not produce, so the
// directory never mixes two runs once commit returns. Each file is
// fsynced before its rename and the directory after. It stops at the first
// failure (the model goes first, so a model that cannot be put in place
// leaves an earlier run whole) and leaves the files not yet moved in the
// staging directory, which the error names.
func (d *runDir) commit() error {
	for _, f := range RunFiles() {
		src, dst := filepath.Join(d.stage, f), filepath.Join(d.dir, f)
		var err error
		if _, serr := os.Stat(src); serr == nil {
			err = atomicfile.Rename(src, dst)
		} else if rerr := os.Remove(dst); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("remove the earlier run's %s: %w", f, rerr)
		}
		if err != nil {
			return fmt.Errorf("algo: %s not put in place (the new run's remaining files are in %s): %w", f, d.stage, err)
		}
	}
	if err := errors.Join(os.RemoveAll(d.stage), atomicfile.SyncDir(d.dir)); err != nil {
		return fmt.Errorf("algo: commit %s: %w", d.dir, err)
	}
	return nil
}

// abort drops the staged files. A directory that openRunDir created and
// that holds nothing else is removed again.
func (d *runDir) abort() {
	os.RemoveAll(d.stage)
	if !d.created {
		return
	}
	ents, err := os.ReadDir(d.dir)
	if err == nil && !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() != LockFile }) {
		os.Remove(filepath.Join(d.dir, LockFile))
		os.Remove(d.dir)
	}
}

// close releases the lock.
func (d *runDir) close() {
	if d.lock != nil {
		unlockFile(d.lock)
		d.lock = nil
	}
}
