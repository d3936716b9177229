package launch

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// supervisor starts and watches a run's worker processes: it restarts a
// crashed env or policy worker with back-off within its restart budget,
// and the learner, within the same budget, when a signal killed it (a
// learner that exits reports the run's result with its status),
// and once the learner has exited (or anything failed, or the run's
// context ended) it stops every worker, the learner first.
type supervisor struct {
	command  []string // the worker command line; each worker's flags follow
	env      []string // the workers' environment
	stderr   io.Writer
	ttl      time.Duration
	restarts int
	window   time.Duration
	// endRun closes the controller's registration, which tells every
	// worker to exit.
	endRun func()
	// profiles, when set, is the folder of each worker's --cpuprofile.
	profiles string
	// noResume, when set, says why the run's learner cannot resume: a
	// learner killed by a signal is then not started again (it could only
	// fail on its checkpoints), and the run fails at once, naming the kill
	// and this.
	noResume string

	ctx     context.Context // ended by stopAll: every worker stops
	stopAll context.CancelFunc
	wg      sync.WaitGroup
	errs    chan error
	// learnerDone is closed once the learner process has exited (or could
	// not start); learnerExit is its exit status then (-1: killed by a
	// signal or never started). The other workers are stopped only after
	// it, so that a learner stopped by the launcher sees the launcher's
	// signal first and not its registration vanishing.
	learnerDone chan struct{}
	learnerExit int
}

// init readies s to start workers under ctx.
func (s *supervisor) init(ctx context.Context) *supervisor {
	s.ctx, s.stopAll = context.WithCancel(ctx)
	s.errs = make(chan error, 64)
	s.learnerDone = make(chan struct{})
	s.learnerExit = -1
	return s
}

// start runs the worker name with args in a goroutine; restart marks an
// env or policy worker (restarted when it exits), !restart the learner
// (whose exit ends the run; restarted only when a signal killed it). out
// receives the worker's stdout.
func (s *supervisor) start(name string, args []string, restart bool, out io.Writer) {
	if s.profiles != "" {
		args = append(args, "--cpuprofile", filepath.Join(s.profiles, strings.ReplaceAll(name, " ", "-")+".pprof"))
	}
	s.wg.Go(func() {
		budget := restartBudget{max: s.restarts, window: s.window}
		if !restart {
			defer close(s.learnerDone)
		}
		for {
			stopped, err := s.runOnce(name, args, restart, !restart, out)
			if stopped {
				return
			}
			if !restart && (err == nil || s.learnerExit != -1) {
				// The learner's exit status is the run's result.
				if err != nil {
					s.errs <- fmt.Errorf("launch: %s: %w", name, err)
				}
				s.stopAll()
				return
			}
			if s.ctx.Err() != nil {
				return
			}
			n, over := budget.fail(time.Now())
			if over {
				s.errs <- fmt.Errorf("launch: %s failed %d times within %v, last: %v", name, n, s.window, err)
				s.stopAll()
				return
			}
			d := min(100*time.Millisecond<<min(n-1, 6), 5*time.Second)
			if !restart && s.noResume != "" {
				s.errs <- fmt.Errorf("launch: %s was killed (%v); not started again, since the run cannot resume: %s", name, err, s.noResume)
				s.stopAll()
				return
			}
			if !restart {
				// Killed by a signal (SIGKILL, the OOM killer): it left no
				// result, and its next start resumes from its checkpoints.
				d = 0
				fmt.Fprintf(s.stderr, "launch: %s was killed (%v); restarting it to resume the run\n", name, err)
			} else {
				fmt.Fprintf(s.stderr, "launch: %s exited (%v); restarting in %v\n", name, err, d)
			}
			select {
			case <-time.After(d):
			case <-s.ctx.Done():
				return
			}
		}
	})
}

// startPeer runs learner name (a data-parallel learner after the first)
// in a goroutine: never restarted (the learners share every update, so a
// new process could not join the run's rounds), its exit 0 is the normal
// end of its updates, and a failure is reported and left to learner 0,
// which sees the registration gone and ends the run with an error naming
// it.
func (s *supervisor) startPeer(name string, args []string, out io.Writer) {
	if s.profiles != "" {
		args = append(args, "--cpuprofile", filepath.Join(s.profiles, strings.ReplaceAll(name, " ", "-")+".pprof"))
	}
	s.wg.Go(func() {
		stopped, err := s.runOnce(name, args, true, true, out)
		if !stopped && err != nil {
			s.errs <- fmt.Errorf("launch: %s: %w", name, err)
		}
	})
}

// runOnce runs the worker process once; learner marks a learner (it saves
// the run when stopped). It returns stopped when the supervisor stopped it
// (or it could not start): then the worker is not to be restarted; and the
// process's exit error.
func (s *supervisor) runOnce(name string, args []string, restart, learner bool, out io.Writer) (stopped bool, err error) {
	cmd := exec.Command(s.command[0], append(slices.Clone(s.command[1:]), args...)...)
	cmd.Env = s.env
	// An env or policy worker stopped at the end of the run says so on
	// stderr; that is routine, so its stderr is muted once the launcher
	// stops it. The learner is stopped only when the run fails or is
	// interrupted, and what it says then counts.
	errOut := &muteWriter{w: s.stderr}
	cmd.Stdout, cmd.Stderr = out, errOut
	setChildAttrs(cmd, learner)
	if err := cmd.Start(); err != nil {
		s.errs <- fmt.Errorf("launch: start %s: %w", name, err)
		s.stopAll()
		return true, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
		if !restart {
			s.learnerExit = cmd.ProcessState.ExitCode()
		}
		return false, err
	case <-s.ctx.Done():
	}
	// Workers exit by themselves once the controller is gone, but a
	// worker whose watch sat on a NATS node that died would only see it
	// when its own keep-alive fails: this launcher owns the process, so
	// it asks directly (the worker stops as on Ctrl-C), and kills
	// stragglers.
	// exited: done's only value is taken, so the process must not be
	// waited for again.
	exited := false
	if restart {
		select {
		case <-s.learnerDone:
		case <-done:
			exited = true
		}
		s.endRun()
		errOut.mute()
	}
	if !exited {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(2*s.ttl + 5*time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if !restart {
		s.learnerExit = cmd.ProcessState.ExitCode()
	} else if s.profiles != "" && cmd.ProcessState.ExitCode() == ExitFailed {
		// A worker stopped at the end exits 0; 1 here is a profile it
		// could not write (a full disk), which must not pass unseen.
		s.errs <- fmt.Errorf("launch: %s failed as it stopped (exit status %d): its CPU profile in %s is likely incomplete", name, ExitFailed, s.profiles)
	}
	return true, nil
}

// wait waits for every worker to end and returns the learner's exit
// status and the failures.
func (s *supervisor) wait() (learnerExit int, errs []error) {
	s.wg.Wait()
	s.stopAll()
	close(s.errs)
	for err := range s.errs {
		errs = append(errs, err)
	}
	return s.learnerExit, errs
}

// restartBudget counts a worker's failures within a sliding window, so a
// long run survives rare crashes while a crash loop still ends it.
type restartBudget struct {
	max    int
	window time.Duration
	fails  []time.Time
}

// fail records a failure at now and returns the failures within the
// window and whether they exceed max restarts.
func (b *restartBudget) fail(now time.Time) (int, bool) {
	b.fails = append(slices.DeleteFunc(b.fails, func(t time.Time) bool { return now.Sub(t) > b.window }), now)
	return len(b.fails), len(b.fails) > b.max
}

// lockedWriter serializes writes from the worker processes' copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// muteWriter passes writes to w until mute is called, then drops them.
// exec's copying goroutine writes while the launcher mutes.
type muteWriter struct {
	w     io.Writer
	muted atomic.Bool
}

func (m *muteWriter) Write(p []byte) (int, error) {
	if m.muted.Load() {
		return len(p), nil
	}
	return m.w.Write(p)
}

func (m *muteWriter) mute() { m.muted.Store(true) }
