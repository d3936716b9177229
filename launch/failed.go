package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"herd/algo"
	"herd/internal/redact"
	"herd/metrics"
)

// failedRun is what the launcher knows of a run that failed, for its
// summary.json.
type failedRun struct {
	res *algo.Resolved
	// causes are the supervisor's failures, the first cause first.
	causes []error
	// learnerMark is the learner's end mark, "" when it left none.
	learnerMark string
	// learnerExit is the learner's exit status (-1: killed by a signal).
	learnerExit int
	// natsURL holds the credentials no file may repeat.
	natsURL string
	// started is when the launcher started the workers: run files older
	// than its whole second are an earlier run's (--force); file systems
	// with coarse times round down.
	started time.Time
}

// record makes the run directory say that the run failed, and why, and
// returns where its summary is: a summary.json the learner wrote as
// interrupted (the launcher stopped it because something else failed) is
// marked failed; one the learner closed otherwise stays as it is; where
// the learner wrote none (killed, or failed before it opened its files),
// the launcher writes it (metrics.WriteFailed) beside the files the
// learner left and puts them in place (algo.FinishStaged). The reason is
// the first cause, then the learner's own message, with the NATS
// credentials cut out.
func (f failedRun) record() (where string, err error) {
	reason := errors.Join(f.causes...).Error()
	if code, msg, ok := parseEndMark(f.learnerMark); ok && code != ExitOK {
		reason += "\nthe learner's error: " + msg
	}
	reason = redact.URLError(errors.New(reason), f.natsURL).Error()
	h := f.res.Header
	since := f.started.Truncate(time.Second)
	path := filepath.Join(h.Out, algo.SummaryFile)
	if fi, err := os.Stat(path); err == nil && !fi.ModTime().Before(since) {
		if f.learnerExit != ExitInterrupted {
			return h.Out, nil // the learner's own record of its failure
		}
		if err := metrics.MarkFailed(path, reason); err != nil {
			return "", fmt.Errorf("launch: summary not marked failed: %w", err)
		}
		return h.Out, nil
	}
	s := metrics.Summary{Reason: reason, Algo: h.Algo, Env: h.Env, Seed: h.Seed, PlannedSteps: h.Steps,
		WallSeconds: time.Since(f.started).Seconds()}
	where, err = algo.FinishStaged(h.Out, since, func(stage string) error {
		_, err := metrics.WriteFailed(stage, s, since) // a summary there is the learner's own
		return err
	})
	if err != nil {
		return "", fmt.Errorf("launch: no summary in %s for the failed run: %w", h.Out, err)
	}
	return where, nil
}

// readEnd reads the run's end mark, "" when it cannot.
func readEnd(ended func(context.Context) (string, bool, error)) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mark, ok, err := ended(ctx)
	if err != nil || !ok {
		return ""
	}
	return mark
}
