package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"herd/algo"
	"herd/transport"
)

// The wire bytes merged into summary.json keep its two-space indentation.
func TestMergeJSONIndent(t *testing.T) {
	m, err := mergeJSON([]byte("{\n  \"steps\": 3\n}\n"), map[string]any{"wire_by_kind": map[string]int{"weights": 1}, "wire_bytes": 2})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Indent(&want, m, "", "  "); err != nil {
		t.Fatal(err)
	}
	if got := string(m); got != want.String() {
		t.Errorf("merged summary:\n%s\nwant:\n%s", got, want.String())
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:p@h:4222":                 "nats://***@h:4222",
		"nats://tok@h:4222,nats://a:b@g:1":  "nats://***@h:4222,nats://***@g:1",
		"nats://h:4222":                     "nats://h:4222",
		"u:p@h:4222":                        "***@h:4222",
		"tls://user:p%40ss@host.example:42": "tls://***@host.example:42",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRestartBudgetWindow: the restart budget counts failures within the
// window, so failures spread over a long run never exhaust it, while a
// burst does.
func TestRestartBudgetWindow(t *testing.T) {
	b := restartBudget{max: 3, window: 10 * time.Minute}
	t0 := time.Unix(0, 0)
	for i := range 20 { // one failure every 5 minutes: at most 3 in any window
		if n, over := b.fail(t0.Add(time.Duration(i) * 5 * time.Minute)); over || n > 3 {
			t.Fatalf("failure %d (5 min apart): %d in the window, over %v", i, n, over)
		}
	}
	burst := t0.Add(200 * time.Minute)
	for i := range 4 {
		n, over := b.fail(burst.Add(time.Duration(i) * time.Second))
		if over != (i == 3) {
			t.Fatalf("burst failure %d: %d in the window, over %v", i, n, over)
		}
	}
}

// ExitStatus: a clean interruption is an error wrapping context.Canceled
// alone; a failure formatted with %v beside it is a failure.
func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailed},
		{fmt.Errorf("run interrupted: %w", context.Canceled), ExitInterrupted},
		{fmt.Errorf("%v", fmt.Errorf("interrupted: %w", context.Canceled)), ExitFailed},
		{&LearnerError{Status: ExitInterrupted, Message: "saved"}, ExitInterrupted},
		{&LearnerError{Status: ExitFailed, Message: "diverged"}, ExitFailed},
		{&LearnerError{Status: -1}, ExitFailed},
	} {
		if got := ExitStatus(c.err); got != c.want {
			t.Errorf("ExitStatus(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// The run's end mark carries the learner's exit status, which a
// --no-workers controller exits with: a completed, an interrupted and a
// failed learner, and the controller's own mark (no learner result).
func TestEndMark(t *testing.T) {
	for _, err := range []error{nil, errors.New("diverged at step 9"), fmt.Errorf("stopped: %w", context.Canceled)} {
		code, msg, ok := parseEndMark(endMark(err))
		if !ok || code != ExitStatus(err) || (err != nil && msg != err.Error()) {
			t.Errorf("endMark(%v) reads back as %d %q %v, want %d", err, code, msg, ok, ExitStatus(err))
		}
		got := learnerResult(endMark(err), true)
		if ExitStatus(got) != ExitStatus(err) {
			t.Errorf("result of %v read back as %v (status %d, want %d)", err, got, ExitStatus(got), ExitStatus(err))
		}
		var le *LearnerError
		if err != nil && (!errors.As(got, &le) || le.Message != err.Error()) {
			t.Errorf("result of %v read back as %#v", err, got)
		}
	}
	if _, _, ok := parseEndMark(controllerEndMark); ok {
		t.Error("the controller's end mark reads as a learner's result")
	}
	for _, c := range []struct {
		mark  string
		ended bool
	}{{controllerEndMark, true}, {"0 completed", false}, {"garbage", true}} {
		var le *LearnerError
		if got := learnerResult(c.mark, c.ended); !errors.As(got, &le) || le.Status != -1 {
			t.Errorf("learnerResult(%q, %v) = %v, want the learner gone without a result", c.mark, c.ended, got)
		}
	}
	if d := describeEnd(endMark(nil)); d != "completed" {
		t.Errorf("describeEnd(completed) = %q", d)
	}
}

// checkRunDir refuses before any process starts what the learner would.
func TestCheckRunDir(t *testing.T) {
	empty, full := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(full, algo.RunFiles()[0]), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir  string
		mode algo.DirMode
		want error
	}{
		{empty, algo.DirNew, nil},
		{full, algo.DirNew, algo.ErrRunExists},
		{full, algo.DirForce, nil},
		{empty, algo.DirResume, algo.ErrCannotResume},
		{full, algo.DirResume, algo.ErrCannotResume},
	} {
		err := checkRunDir(c.dir, c.mode)
		if (c.want == nil) != (err == nil) || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("checkRunDir(%s, %v) = %v, want %v", c.dir, c.mode, err, c.want)
		}
	}
}

// A learner that registers, trains and leaves between two of the
// controller's polls is never seen in Membership; its end mark ends the
// wait with its result (before, the controller waited forever). With no
// learner and no mark the wait ends at the registration timeout, naming it.
func TestAwaitLearnerShortRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mem, err := transport.NewInproc().Membership(ctx, "short", transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	wait := func(ended func(context.Context) (string, bool, error), register time.Duration) learnerWait {
		return learnerWait{mem: mem, ended: ended, register: register, save: time.Second,
			stop: func(context.Context) error { return nil }}
	}
	for _, c := range []struct {
		mark    string
		wantNil bool
	}{{endMark(nil), true}, {endMark(errors.New("boom")), false}} {
		start := time.Now()
		err := awaitLearner(ctx, wait(func(context.Context) (string, bool, error) { return c.mark, true, nil }, time.Minute))
		if (err == nil) != c.wantNil {
			t.Errorf("mark %q: awaitLearner = %v, want nil %v", c.mark, err, c.wantNil)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("mark %q: awaitLearner took %v", c.mark, d)
		}
	}
	none := func(context.Context) (string, bool, error) { return "", false, nil }
	start := time.Now()
	err = awaitLearner(ctx, wait(none, 1500*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "no learner registered within 1.5s") || ExitStatus(err) != ExitFailed {
		t.Errorf("no learner: awaitLearner = %v, want the registration timeout", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("no learner: awaitLearner took %v past a 1.5s registration timeout", d)
	}
	// Interrupted before any learner came: a failure (nothing saved).
	sctx, scancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer scancel()
	if err := awaitLearner(sctx, wait(none, time.Minute)); err == nil || ExitStatus(err) == ExitInterrupted {
		t.Errorf("interrupted with no learner: awaitLearner = %v, want a failure", err)
	}
}

// An interrupted controller exits as interrupted (130) only when its
// learner's mark says it saved the run; otherwise it fails naming why.
func TestAwaitLearnerInterrupt(t *testing.T) {
	for _, c := range []struct {
		name   string
		mark   string // the learner's mark after the stop; "" none
		status int
		says   string
		late   bool // the learner registers after the first poll, the interrupt comes before the next
	}{
		{"saved", endMark(fmt.Errorf("interrupted: %w", context.Canceled)), ExitInterrupted, "saved the run", false},
		{"registered-since-poll", endMark(fmt.Errorf("interrupted: %w", context.Canceled)), ExitInterrupted, "saved the run", true},
		{"failed", endMark(errors.New("checkpoint not saved: disk full")), ExitFailed, "did not save the run", false},
		{"silent", "", ExitFailed, "did not report", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bg, cancelBG := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancelBG()
			mem, err := transport.NewInproc().Membership(bg, "int", transport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			lctx, leave := context.WithCancel(bg)
			defer leave()
			register := func() {
				if _, err := mem.Register(lctx, "learner-0", nil); err != nil {
					t.Error(err)
				}
			}
			interruptAt := 1200 * time.Millisecond
			if c.late {
				time.AfterFunc(300*time.Millisecond, register)
				interruptAt = 700 * time.Millisecond
			} else {
				register()
			}
			var stopped atomic.Bool
			ctx, interrupt := context.WithCancel(bg)
			w := learnerWait{mem: mem, register: time.Minute, save: 1500 * time.Millisecond,
				ended: func(context.Context) (string, bool, error) {
					if stopped.Load() && c.mark != "" {
						return c.mark, true, nil
					}
					return "", false, nil
				},
				stop: func(context.Context) error { stopped.Store(true); leave(); return nil }}
			time.AfterFunc(interruptAt, interrupt)
			err = awaitLearner(ctx, w)
			if !stopped.Load() {
				t.Error("the learner was not asked to stop")
			}
			if ExitStatus(err) != c.status || err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("awaitLearner = %v (exit %d), want exit %d saying %q", err, ExitStatus(err), c.status, c.says)
			}
		})
	}
}
