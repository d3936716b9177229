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
	if where, err := f.record(); err != nil || where != res.Header.Out {
		t.Fatalf("summary in %q, err %v", where, err)
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
		if _, err := f.record(); err != nil {
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
}

// A killed learner's staged files are put in place with the launcher's
// summary, its partial row cut; with an earlier run in the directory
// (--force) they stay staged and the earlier run is untouched.
func TestFailedRunStaged(t *testing.T) {
	res := &algo.Resolved{Header: algo.Header{Algo: "ppo", Env: "CartPole-v1", Seed: 7, Steps: 1000}}
	const csv = "step,wall_seconds,sps,episodes,return_mean_100,return_std_100,length_mean_100,return_recent\n256,1,256,4,18,2,18,19\n512,2,2"
	for _, earlier := range []bool{false, true} {
		dir := t.TempDir()
		res.Header.Out = dir
		if earlier {
			if err := os.WriteFile(filepath.Join(dir, algo.SummaryFile), []byte(`{"status": "completed"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(filepath.Join(dir, algo.SummaryFile), old, old); err != nil {
				t.Fatal(err)
			}
		}
		started := time.Now()
		stage := filepath.Join(dir, ".staging")
		if err := os.MkdirAll(stage, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stage, algo.MetricsFile), []byte(csv), 0o644); err != nil {
			t.Fatal(err)
		}
		f := failedRun{res: res, learnerExit: -1, started: started, causes: []error{errors.New("launch: learner was killed (signal: killed)")}}
		where, err := f.record()
		if err != nil {
			t.Fatal(err)
		}
		want := dir
		if earlier {
			want = stage
			if b, _ := os.ReadFile(filepath.Join(dir, algo.SummaryFile)); string(b) != `{"status": "completed"}` {
				t.Errorf("the earlier run's summary changed: %s", b)
			}
		}
		s, err := metrics.ReadSummary(filepath.Join(want, algo.SummaryFile))
		if where != want || err != nil || s.Status != metrics.StatusFailed || s.Steps != 256 || s.Episodes != 4 {
			t.Errorf("earlier run %v: summary in %q (want %q), %+v, %v", earlier, where, want, s, err)
		}
		if b, _ := os.ReadFile(filepath.Join(want, algo.MetricsFile)); !strings.HasSuffix(string(b), "18,19\n") {
			t.Errorf("earlier run %v: metrics.csv %q", earlier, b)
		}
	}
}
