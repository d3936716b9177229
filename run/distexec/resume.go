package distexec

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"herd/algo"
	"herd/internal/trainstate"
	"herd/transport"
	"herd/worker"
)

// Sections of a dist checkpoint, beside the learner's
// (algo.LearnerCheckpoint) and TrainRun's own.
const (
	secLoop     = "dist/loop"     // the iterations done and the global env step
	secCounters = "dist/counters" // distTotals (JSON)
	secDedup    = "dist/dedup"    // transport.DedupWindow: the sample ids learned
)

// distTotals are the run's dist/… counts up to a checkpoint: the
// learner's counters, and what earlier learner processes' sample streams
// counted (a stream's Stats start at 0 with its process).
type distTotals struct {
	Counters worker.Counters
	// Duplicates, Shed and StreamErrors are the streams' repeated pushes,
	// pushes shed and undecodable messages; Discarded the samples
	// acknowledged and never learned (Stats.Lost included).
	Duplicates, Shed, StreamErrors, Discarded uint64
	// Resumes counts the learner starts that continued from a checkpoint.
	Resumes uint64
}

// notResumable says why a dist run of spec with header h cannot be
// checkpointed, "" when it can (algo.Executor.NotResumable).
func notResumable(h algo.Header, spec algo.Spec) string {
	switch {
	case h.Runtime.Learners > 1:
		return "several data-parallel learners save no training state yet"
	case h.MultiAgent.Enabled():
		return "a run with a multiagent section saves no training state yet"
	}
	return ""
}

// checkpointer saves and restores the learner's side of a dist run. A checkpoint is taken between two updates: after the learner has
// learned a segment and published the version made from it, and before it
// pulls the next. There the learner holds no sample it has taken and not
// learned (the on-policy queue holds none, OnCapacity), so the ids its
// sample stream returned are exactly those learned, which the checkpoint
// keeps as its dedup window. The env and policy workers are not saved:
// they outlive the learner (herd launch restarts it alone) and continue
// from their own progress records.
type checkpointer struct {
	ck  *algo.Checkpoints
	smp transport.SampleStream
	mon *monitor
	// learner is the run's learner, set by start.
	learner algo.LearnerCheckpoint
	// it and step are the iterations done and the global step, advanced
	// by the caller after each update.
	it   int
	step int64
	// dedup: restore the dedup window (the workers outlived the learner
	// that saved it; workers started with this learner number their
	// samples afresh).
	dedup bool
}

// start restores the checkpoint's state into l, or saves the run's first
// checkpoint (step 0) for a run that starts fresh, so that a learner
// killed before its first periodic checkpoint resumes too. It returns the
// iterations already done.
func (c *checkpointer) start(l algo.SegmentLearner) (int, error) {
	lc, ok := l.(algo.LearnerCheckpoint)
	var err error
	if !ok {
		err = fmt.Errorf("dist: learner %T cannot save its state", l)
	}
	return c.it, c.begin(lc, err)
}

// startOff is start for the Ape-X topology's learner and its replay,
// saved together (algo.OffPolicy.Checkpoint); it returns the global env
// step already learned.
func (c *checkpointer) startOff(pieces *algo.Pieces) func(algo.TransitionLearner, algo.Replay) (int64, error) {
	return func(l algo.TransitionLearner, rb algo.Replay) (int64, error) {
		if pieces.Checkpoint == nil {
			return 0, c.begin(nil, fmt.Errorf("dist: learner %T cannot save its state", l))
		}
		lc, err := pieces.Checkpoint(l, rb)
		if err != nil {
			err = fmt.Errorf("dist: %w", err)
		}
		return c.step, c.begin(lc, err)
	}
}

// begin restores the checkpoint into lc or saves the first one; cannot,
// when set, says why lc cannot be saved: an error for a resumed run, else
// the run's checkpoints are disabled.
func (c *checkpointer) begin(lc algo.LearnerCheckpoint, cannot error) error {
	if cannot != nil {
		if c.ck.Restored() != nil {
			return cannot
		}
		c.ck.Disable(cannot.Error())
		return nil
	}
	c.learner = lc
	s := c.ck.Restored()
	if s == nil {
		return c.save()
	}
	if err := c.restore(s); err != nil {
		return fmt.Errorf("dist: resume from step %d: %w", s.Header.Step, err)
	}
	return nil
}

func (c *checkpointer) restore(s *trainstate.State) error {
	if err := c.learner.RestoreLearner(s); err != nil {
		return err
	}
	b, ok := s.Sections[secLoop]
	if !ok || len(b) != 16 {
		return fmt.Errorf("%w: section %s missing or not 16 bytes", trainstate.ErrCorrupt, secLoop)
	}
	c.it, c.step = int(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))
	if c.step != s.Header.Step {
		return fmt.Errorf("%w: the loop is at step %d, the header says %d", trainstate.ErrCorrupt, c.step, s.Header.Step)
	}
	var tot distTotals
	if err := json.Unmarshal(s.Sections[secCounters], &tot); err != nil {
		return fmt.Errorf("%w: section %s: %w", trainstate.ErrCorrupt, secCounters, err)
	}
	tot.Resumes++
	c.mon.cnt, c.mon.prior, c.mon.step = tot.Counters, tot, c.step
	if d, ok := c.smp.(transport.DedupWindow); ok && c.dedup {
		b, err := s.Section(secDedup)
		if err != nil {
			return err
		}
		if err := d.RestoreDedup(b); err != nil {
			return fmt.Errorf("section %s: %w", secDedup, err)
		}
	}
	return nil
}

// save writes the checkpoint of the learner as it stands (between two
// updates).
func (c *checkpointer) save() error {
	if c.learner == nil {
		return nil
	}
	out := map[string][]byte{}
	if err := c.learner.SaveLearner(out); err != nil {
		return err
	}
	out[secLoop] = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(c.it)), uint64(c.step))
	var err error
	if out[secCounters], err = json.Marshal(c.mon.totals()); err != nil {
		return err
	}
	if d, ok := c.smp.(transport.DedupWindow); ok {
		out[secDedup] = d.MarshalDedup()
	}
	return c.ck.Save(c.step, out)
}

// atBoundary reports whether the learner has made exactly the updates
// counted (a learner stopped inside an update that it finished, but whose
// version it could not publish, is one ahead of its loop).
func (c *checkpointer) atBoundary() bool {
	return c.learner != nil && c.learner.(algo.SegmentLearner).Weights().N == uint64(c.it)
}

// minVersion is the least number of the learner's first version: above
// every version the run's readers may hold when an earlier learner
// published on the same streams (transport.HeldBound), else 0.
func minVersion(ctx context.Context, par transport.ParamService) (uint64, error) {
	if hb, ok := par.(transport.HeldBound); ok {
		return hb.AboveHeld(ctx)
	}
	return 0, nil
}
