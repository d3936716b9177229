package launch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/algo"
	"herd/metrics"
)

// A failed run's directory says so: the launcher writes the summary a
// killed learner could not, with the first cause and the learner's error
// and without the NATS password; it marks a summary the learner closed
// as interrupted failed; it leaves a summary the learner closed itself.
func TestFailedRunRecord(t *testing.T) {
	const url = "nats://herd:s3cret@127.0.0.1:4222"
	res := &algo.Resolved{Header: algo.Header{Algo: "ppo", Env: "CartPole-v1", Seed: 7, Steps: 1000}}
	started := time.Now()
	read := func(dir string) metrics.Summary {
		t.Helper()
		s, err := metrics.ReadSummary(filepath.Join(dir, algo.SummaryFile))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	res.Header.Out = filepath.Join(t.TempDir(), "run")
	f := failedRun{res: res, learnerExit: -1, natsURL: url, started: started, learnerMark: "1 connect to " + url + ": refused",
		causes: []error{errors.New("launch: learner was killed (signal: killed)"), errors.New("launch: env worker 0: exit status 1")}}
	if err := f.record(); err != nil {
		t.Fatal(err)
	}
	s := read(res.Header.Out)
	if s.Status != metrics.StatusFailed || !strings.HasPrefix(s.Reason, "launch: learner was killed (signal: killed)\n") ||
		!strings.Contains(s.Reason, "env worker 0") || !strings.Contains(s.Reason, "the learner's error: connect to") ||
		strings.Contains(s.Reason, "s3cret") || s.Algo != "ppo" || s.PlannedSteps != 1000 {
		t.Errorf("launcher's summary %+v", s)
	}

	for _, c := range []struct {
		status     string
		exit       int
		wantStatus string
	}{{metrics.StatusFailed, ExitFailed, metrics.StatusFailed}, {metrics.StatusInterrupted, ExitInterrupted, metrics.StatusFailed}} {
		dir := t.TempDir()
		res.Header.Out = dir
		rec, err := metrics.NewRecorder(metrics.Options{Dir: dir, Algo: "ppo", Env: "CartPole-v1", TotalSteps: 1000, LogEvery: 100})
		if err != nil {
			t.Fatal(err)
		}
		rec.Step(300)
		rec.SetStatus(c.status, "the learner's reason")
		if _, err := rec.Close(c.exit == ExitInterrupted); err != nil {
			t.Fatal(err)
		}
		f := failedRun{res: res, learnerExit: c.exit, natsURL: url, started: started, causes: []error{errors.New("launch: learner: exit status 1")}}
		if err := f.record(); err != nil {
			t.Fatal(err)
		}
		s := read(dir)
		if s.Status != c.wantStatus || s.Steps != 300 {
			t.Errorf("learner's %s summary became %+v", c.status, s)
		}
		if own := c.exit != ExitInterrupted; own != (s.Reason == "the learner's reason") {
			t.Errorf("learner's %s summary has the reason %q", c.status, s.Reason)
		}
	}
	if _, err := os.Stat(filepath.Join(res.Header.Out, algo.MetricsFile)); err != nil {
		t.Fatal(err)
	}
}
