package algo

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	envpkg "herd/env"
	"herd/internal/rng"
	"herd/internal/trainstate"
	"herd/metrics"

	"go.yaml.in/yaml/v4"
)

// Defaults of the checkpoint keys of Header.
const (
	// DefaultCheckpointEvery is checkpoint_every's default, in env steps:
	// a few seconds of training for the classic-control runs, whose
	// checkpoint costs milliseconds (docs/BENCHMARKS.md).
	DefaultCheckpointEvery = 100_000
	// DefaultCheckpointKeep is checkpoint_keep's default.
	DefaultCheckpointKeep = 3
	// CheckpointDir is the directory of a run directory that holds its
	// checkpoints (internal/trainstate files, state-<step>.herdstate).
	CheckpointDir = "checkpoints"
)

// Sections of a checkpoint that TrainRun itself writes, beside the
// algorithm's.
const (
	// SectionConfig holds the run's configuration without the keys that
	// may change on resume (ResumeConfig), to name what changed.
	SectionConfig = "config"
	// SectionMetrics holds the metrics recorder's state and the
	// metrics.csv and event file bytes up to the checkpoint's step.
	SectionMetrics = "metrics"
	// SectionRestarts holds the envs the run's earlier resumes restarted
	// (RestartEnvs): their count and the number of resumes.
	SectionRestarts = "resume/restarts"
)

// Checkpoints is where a resumable Train (Spec.Resumable) saves its whole
// state and finds the state it continues from. Train calls Due after each
// iteration and Save when it is due, when it stops on cancellation (not
// on divergence) and at its end, each time at an iteration boundary.
// Used by the goroutine running Train only.
type Checkpoints struct {
	every    int64
	dir      trainstate.Dir
	head     trainstate.Header
	config   []byte
	restored *trainstate.State
	next     int64
	// notes guards off, partial and restarts.Reason, which the policies
	// of a run with several (Policy) set from their own goroutines.
	notes   sync.Mutex
	off     string
	partial string // Partial's note
	// restarts sums RestartEnvs over the run's resumes, this one's and
	// those before the checkpoint it continues (SectionRestarts).
	restarts metrics.EnvsRestarted
	// add puts the caller's own sections (the metrics) into a checkpoint.
	add func(*trainstate.State) error
	// saved is told of each checkpoint written.
	saved func(CheckpointInfo)
	err   error // the last Save's
	// run, when set, makes these the checkpoints of one policy of a
	// run with several (Policy): run are the run's.
	run    *Checkpoints
	policy PolicyCheckpoint
}

// CheckpointInfo describes one checkpoint written, for RunOptions.Checkpointed.
type CheckpointInfo struct {
	Step  int64
	Path  string
	Bytes int
	Took  time.Duration // encode, write, fsync and rename
}

// CheckpointOptions configure NewCheckpoints.
type CheckpointOptions struct {
	// Dir is the checkpoint directory (created on the first save).
	Dir string
	// Every and Keep are Header.CheckpointEvery and CheckpointKeep (0:
	// the defaults).
	Every int64
	Keep  int
	// Algo and Env name the run; Config is ResumeConfig's bytes.
	Algo, Env string
	Config    []byte
}

// NewCheckpoints returns the checkpoints of a run that starts fresh; Resume
// makes it continue a restored state.
func NewCheckpoints(o CheckpointOptions) *Checkpoints {
	if o.Every <= 0 {
		o.Every = DefaultCheckpointEvery
	}
	if o.Keep <= 0 {
		o.Keep = DefaultCheckpointKeep
	}
	return &Checkpoints{every: o.Every, next: o.Every, dir: trainstate.Dir{Path: o.Dir, Keep: o.Keep},
		head: trainstate.Header{Algo: o.Algo, Env: o.Env, ConfigHash: configHash(o.Config)}, config: o.Config}
}

// Resume makes Restored return s, and schedules the next periodic
// checkpoint after s's step.
func (c *Checkpoints) Resume(s *trainstate.State) error {
	c.restored = s
	c.next = (s.Header.Step/c.every + 1) * c.every
	b, ok := s.Sections[SectionRestarts]
	if !ok {
		return nil
	}
	if len(b) != 16 {
		return fmt.Errorf("%w: section %s has %d bytes, not 16", trainstate.ErrCorrupt, SectionRestarts, len(b))
	}
	c.restarts.Envs = int64(binary.LittleEndian.Uint64(b))
	c.restarts.Resumes = int64(binary.LittleEndian.Uint64(b[8:]))
	return nil
}

// Restored is the state a resumed run continues from, or nil for a run
// that starts fresh.
func (c *Checkpoints) Restored() *trainstate.State { return c.restored }

// Due reports whether the periodic checkpoint is due at env step step.
func (c *Checkpoints) Due(step int64) bool {
	if c.run != nil {
		return c.run.Disabled() == "" && c.policy.Due(step)
	}
	return c.Disabled() == "" && step >= c.next
}

// Disable turns the checkpoints of this run off (Due false, Save a no-op),
// for a run whose state cannot be saved whole (an env without
// env.Snapshotter); reason says why.
func (c *Checkpoints) Disable(reason string) {
	if c.run != nil {
		c.run.notes.Lock()
		defer c.run.notes.Unlock()
		if c.run.off == "" {
			c.run.off = "policy " + c.policy.ID + ": " + reason
		}
		return
	}
	c.notes.Lock()
	defer c.notes.Unlock()
	c.off = reason
}

// Partial records what this run's checkpoints leave out (the executor's
// envs, which restart their episodes on resume): summary.json's
// checkpoints note is then "on: " + what.
func (c *Checkpoints) Partial(what string) {
	if c.run != nil {
		c = c.run
	}
	c.notes.Lock()
	defer c.notes.Unlock()
	c.partial = what
}

// partialNote is what Partial recorded, "" when nothing.
func (c *Checkpoints) partialNote() string {
	c.notes.Lock()
	defer c.notes.Unlock()
	return c.partial
}

// EnvsNotSaved makes the checkpoints of a run whose envs cannot save
// their state (why, wrapping env.ErrNoSnapshot) hold everything else,
// and says so in summary.json's checkpoints note (Partial). A resumed
// run then restarts the envs' episodes (RestartEnvs).
func (c *Checkpoints) EnvsNotSaved(why error) {
	if c.run != nil {
		c = c.run
	}
	c.notes.Lock()
	c.restarts.Reason = why.Error()
	c.notes.Unlock()
	c.Partial(fmt.Sprintf("the envs are not saved (%v): on resume they start new episodes, and the episodes unfinished at the checkpoint end there (their returns unlogged, an off-policy run's pending n-step transitions unstored; summary.json envs_restarted counts them)", why))
}

// EnvsSaveable sorts out err, what saving the run's envs gave
// (env.MarshalVector, env.MarshalChain): nil, their state can be saved
// (true); env.ErrNoSnapshot, it cannot, and the checkpoints hold
// everything else (EnvsNotSaved; false, nil); any other error is
// returned.
func (c *Checkpoints) EnvsSaveable(err error) (bool, error) {
	if errors.Is(err, envpkg.ErrNoSnapshot) {
		c.EnvsNotSaved(err)
		return false, nil
	}
	return err == nil, err
}

// RestartEnvs records that the resumed run's n envs, whose state the
// checkpoint does not hold (EnvsNotSaved), started new episodes instead
// of continuing theirs: the episodes they were in are dropped. summary.json's
// envs_restarted sums them over the run's resumes.
func (c *Checkpoints) RestartEnvs(n int) {
	if c.run != nil {
		return // the executor of the policies counts the run's envs once
	}
	c.restarts.Envs += int64(n)
	c.restarts.Resumes++
}

// RestartSeed is the reset seed of envs that a run resumed from the
// checkpoint of env step step restarts (RestartEnvs): a stream of the run's
// seed and the role's own, so that each resumption's episodes are
// reproducible and differ from the first reset's.
func RestartSeed(seed uint64, role string, step int64) int64 {
	return int64(rng.Derive(rng.Derive(seed, role+"/restart", 0)+uint64(step), "restart", 0) & math.MaxInt64)
}

// Restarts is what RestartEnvs recorded over the run's resumes, nil when
// no resume restarted an env.
func (c *Checkpoints) Restarts() *metrics.EnvsRestarted {
	if c.restarts.Resumes == 0 {
		return nil
	}
	c.notes.Lock()
	r := c.restarts
	c.notes.Unlock()
	return &r
}

// Disabled is the reason Disable was given, "" while checkpoints are on.
func (c *Checkpoints) Disabled() string {
	if c.run != nil {
		c = c.run
	}
	c.notes.Lock()
	defer c.notes.Unlock()
	return c.off
}

// Save writes the checkpoint of env step step holding sections (the
// algorithm's) and the caller's, keeps the newest ones and schedules the
// next periodic one. A policy's (Policy) hands them to its
// PolicyCheckpoint.Save instead.
func (c *Checkpoints) Save(step int64, sections map[string][]byte) error {
	if c.Disabled() != "" {
		return nil
	}
	if c.run != nil {
		c.err = c.policy.Save(step, sections)
		return c.err
	}
	c.err = c.save(step, sections)
	return c.err
}

// PolicyCheckpoint is how one policy of a run with several (a multiagent
// section) takes part in the run's checkpoints: every policy's state is
// saved at the same joint env step, so the executor of the policies
// decides when (Due) and gathers what each policy's Train saves (Save)
// into one checkpoint with the envs' state.
type PolicyCheckpoint struct {
	// ID is the policy's id (multiagent.policies).
	ID string
	// Due reports whether a checkpoint is due at the policy's own env
	// step (its rows' steps).
	Due func(step int64) bool
	// Save takes the policy's sections at its step.
	Save func(step int64, sections map[string][]byte) error
	// Restored is the policy's part of the checkpoint the run resumes
	// from, its header's step the policy's own; nil for a fresh run.
	Restored *trainstate.State
}

// Policy returns the checkpoints that policy p's Train is handed
// (Runtime.Checkpoints): Due and Save are p's, Restored is p.Restored;
// Disable, Partial and EnvsNotSaved apply to the whole run's c, and
// RestartEnvs is left to the executor, which counts the run's envs once.
func (c *Checkpoints) Policy(p PolicyCheckpoint) *Checkpoints {
	return &Checkpoints{every: c.every, run: c, policy: p, restored: p.Restored}
}

// Next is the env step at or past which the next periodic checkpoint is
// due.
func (c *Checkpoints) Next() int64 { return c.next }

// Err is the error of the last Save, nil when it was written: Train
// returns ctx.Err() when it is cancelled, and the caller reads here
// whether the checkpoint of the interruption was saved.
func (c *Checkpoints) Err() error { return c.err }

func (c *Checkpoints) save(step int64, sections map[string][]byte) error {
	start := time.Now()
	h := c.head
	h.Step = step
	s := trainstate.State{Header: h, Sections: map[string][]byte{SectionConfig: c.config}}
	if c.restarts.Resumes > 0 {
		b := binary.LittleEndian.AppendUint64(nil, uint64(c.restarts.Envs))
		s.Sections[SectionRestarts] = binary.LittleEndian.AppendUint64(b, uint64(c.restarts.Resumes))
	}
	for k, v := range sections {
		if _, dup := s.Sections[k]; dup {
			return fmt.Errorf("algo: checkpoint section %s is TrainRun's own", k)
		}
		s.Sections[k] = v
	}
	if c.add != nil {
		if err := c.add(&s); err != nil {
			return fmt.Errorf("algo: checkpoint at step %d: %w", step, err)
		}
	}
	if err := os.MkdirAll(c.dir.Path, 0o755); err != nil {
		return fmt.Errorf("algo: checkpoint at step %d: %w", step, err)
	}
	p, err := c.dir.Save(s)
	if err != nil {
		return fmt.Errorf("algo: checkpoint at step %d: %w", step, err)
	}
	c.next = (step/c.every + 1) * c.every
	if c.saved != nil {
		size := 0
		if fi, err := os.Stat(p); err == nil {
			size = int(fi.Size())
		}
		c.saved(CheckpointInfo{Step: step, Path: p, Bytes: size, Took: time.Since(start)})
	}
	return nil
}

// LoadCheckpoint returns the newest checkpoint in dir that decodes, with
// its path and a note per newer one it skipped, after checking that it
// belongs to this run: algorithm algo on env, with the configuration
// config (ResumeConfig). A checkpoint of another run is an error wrapping
// ErrCannotResume and trainstate.ErrMismatch that names each difference
// (key by key for the configuration).
func LoadCheckpoint(dir, algo, env string, config []byte) (s *trainstate.State, path string, skipped []string, err error) {
	st, path, skipped, err := trainstate.Dir{Path: dir}.LoadNewest()
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, trainstate.ErrNone) && len(skipped) == 0 {
		why := "the run was stopped before its first checkpoint"
		if e, merr := envpkg.Make(env); merr == nil {
			if _, serr := envpkg.MarshalChain(e); serr != nil {
				why = fmt.Sprintf("the run was stopped before its first checkpoint, or its executor writes none for env %s, which cannot save its state (%v)", env, serr)
			}
			e.Close()
		}
		return nil, "", nil, fmt.Errorf("%w: %s holds no checkpoint: %s; use --force to train it again from scratch, or another --out", ErrCannotResume, dir, why)
	}
	if err != nil {
		return nil, "", skipped, fmt.Errorf("%w: %w", ErrCannotResume, err)
	}
	want := trainstate.Header{Algo: algo, Env: env, ConfigHash: configHash(config)}
	if err := trainstate.Check(st.Header, want); err != nil {
		// Name each difference: the algorithm, the env, and, for the same
		// algorithm, the settings key by key (trainstate.Check's hash
		// otherwise).
		var diff []string
		if st.Header.Algo != algo {
			diff = append(diff, fmt.Sprintf("algorithm %s, not %s", st.Header.Algo, algo))
		}
		if st.Header.Env != env {
			diff = append(diff, fmt.Sprintf("env %s, not %s", st.Header.Env, env))
		}
		if st.Header.Algo == algo && st.Header.ConfigHash != want.ConfigHash {
			if d := configDiff(st.Sections[SectionConfig], config); d != "" {
				diff = append(diff, d)
			} else if st.Header.Env == env {
				diff = append(diff, err.Error())
			}
		}
		return nil, "", skipped, fmt.Errorf("%w: %s: %w: it was taken for %s; nothing was changed (train with the checkpoint's settings, or use --force or another --out for a new run)",
			ErrCannotResume, path, trainstate.ErrMismatch, strings.Join(diff, "; "))
	}
	return &st, path, skipped, nil
}

// ResumeConfig is the run's configuration as a checkpoint records it: the
// resolved config.yaml without the keys a resumed run may change (steps,
// out, log_every, checkpoint_every, checkpoint_keep). Any other change
// makes the checkpoint refuse the run.
func ResumeConfig(res *Resolved) ([]byte, error) {
	r := *res
	r.Header.Steps, r.Header.Out, r.Header.LogEvery = 0, "", 0
	r.Header.CheckpointEvery, r.Header.CheckpointKeep = 0, 0
	return r.Marshal()
}

func configHash(config []byte) string {
	h := sha256.Sum256(config)
	return hex.EncodeToString(h[:8])
}

// configDiff names the keys whose values differ between two ResumeConfig
// documents, as "key a (this run: b)", or "" when it cannot tell.
func configDiff(was, now []byte) string {
	a, b := flatYAML(was), flatYAML(now)
	if a == nil || b == nil {
		return ""
	}
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var diff []string
	for _, k := range keys {
		if k == "env" || k == "algo" { // named apart
			continue
		}
		va, oka := a[k]
		vb, okb := b[k]
		switch {
		case !oka:
			va = "(unset)"
		case !okb:
			vb = "(unset)"
		}
		if va != vb {
			diff = append(diff, fmt.Sprintf("%s %s (this run: %s)", k, va, vb))
		}
	}
	return strings.Join(diff, ", ")
}

// flatYAML maps each leaf of a YAML document to its value, keyed by its
// dotted path; nil when the document does not parse.
func flatYAML(b []byte) map[string]string {
	var root yaml.Node
	if len(b) == 0 || yaml.Load(b, &root) != nil {
		return nil
	}
	out := map[string]string{}
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(prefix, c)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if prefix != "" {
					k = prefix + "." + k
				}
				walk(k, n.Content[i+1])
			}
		default:
			v, err := yaml.Dump(n)
			if err != nil {
				v = []byte(n.Value)
			}
			out[prefix] = strings.TrimSpace(string(v))
		}
	}
	walk("", &root)
	return out
}

// hasCheckpoints reports whether dir holds a checkpoint directory with
// anything in it.
func hasCheckpoints(dir string) bool {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return err != nil || len(ents) > 0
}

// setAsideNewer renames the checkpoints in the directory of loaded whose
// names sort after it (newer, and skipped because they did not load) to
// NAME.damaged, out of the checkpoints a run lists.
func setAsideNewer(loaded string) error {
	dir, name := filepath.Split(loaded)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("algo: %w", err)
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".herdstate") && n > name {
			if err := os.Rename(filepath.Join(dir, n), filepath.Join(dir, n+".damaged")); err != nil {
				return fmt.Errorf("algo: set a damaged checkpoint aside: %w", err)
			}
		}
	}
	return nil
}

// ReadRunConfig returns the configuration of the run in dir, as TrainRun
// wrote it when the run started (DIR/config.yaml, or the staging
// directory's for a run stopped before its files were all written), and
// the path it was read from: what `herd train --resume --out DIR` trains
// with when no --config is given.
func ReadRunConfig(dir string) ([]byte, string, error) {
	path := filepath.Join(dir, ConfigFile)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if staged := filepath.Join(dir, stagingDir, ConfigFile); fileExists(staged) {
			path = staged
		}
	}
	b, err := ReadConfig(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, path, fmt.Errorf("%w %s: it holds no %s", ErrCannotResume, dir, ConfigFile)
	}
	return b, path, err
}

// ResumeDiff names each setting of now that differs from was's, among
// those a resumed run must keep (all but ResumeConfig's exceptions): ""
// when none does.
func ResumeDiff(was, now *Resolved) (string, error) {
	a, err := ResumeConfig(was)
	if err != nil {
		return "", err
	}
	b, err := ResumeConfig(now)
	if err != nil {
		return "", err
	}
	var diff []string
	if was.Header.Algo != now.Header.Algo {
		diff = append(diff, fmt.Sprintf("algo %s (this run: %s)", was.Header.Algo, now.Header.Algo))
	}
	if was.Header.Env != now.Header.Env {
		diff = append(diff, fmt.Sprintf("env %s (this run: %s)", was.Header.Env, now.Header.Env))
	}
	if d := configDiff(a, b); d != "" {
		diff = append(diff, d)
	} else if !bytes.Equal(a, b) && len(diff) == 0 {
		diff = append(diff, "the settings (their YAML differs)")
	}
	return strings.Join(diff, ", "), nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
