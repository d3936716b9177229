package learntest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"herd/algo"
	"herd/internal/trainstate"
)

// ResumeCuts checks that a run resumes bit for bit: train(ck, cut) runs res
// with checkpoints ck (nil: none) and returns the final model's bytes,
// stopping with context.Canceled at env step cut when cut > 0. For each cut
// it stops a run there (checkpoints every `every` steps, the newest two
// kept), resumes from the newest checkpoint, and again, as if the run had
// been killed before writing its last one, from the one before; both must
// end with the uninterrupted run's model.
func ResumeCuts(t *testing.T, res *algo.Resolved, every int64, cuts []int64, train func(ck *algo.Checkpoints, cut int64) ([]byte, error)) {
	t.Helper()
	h := res.Header
	key, err := algo.ResumeConfig(res)
	if err != nil {
		t.Fatal(err)
	}
	newCK := func(dir string) *algo.Checkpoints {
		return algo.NewCheckpoints(algo.CheckpointOptions{Dir: dir, Every: every, Keep: 2, Algo: h.Algo, Env: h.Env, Config: key})
	}
	want, err := train(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	resume := func(dir string) []byte {
		st, _, _, err := algo.LoadCheckpoint(dir, h.Algo, h.Env, key)
		if err != nil {
			t.Fatal(err)
		}
		ck := newCK(dir)
		ck.Resume(st)
		got, err := train(ck, 0)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, cut := range cuts {
		dir := t.TempDir()
		if _, err := train(newCK(dir), cut); !errors.Is(err, context.Canceled) {
			t.Fatalf("cut at %d: %v, want context.Canceled", cut, err)
		}
		names, err := trainstate.Dir{Path: dir}.List()
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 || len(names) > 2 {
			t.Fatalf("cut at %d: checkpoints %v (keep 2)", cut, names)
		}
		backup := t.TempDir()
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err == nil {
				err = os.WriteFile(filepath.Join(backup, n), b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := resume(dir); !bytes.Equal(got, want) {
			t.Fatalf("cut at %d, resumed from %s: the model differs from the uninterrupted run's", cut, names[len(names)-1])
		}
		if len(names) < 2 {
			continue
		}
		// Killed: the cut's own checkpoint never written.
		if err := os.Remove(filepath.Join(backup, names[len(names)-1])); err != nil {
			t.Fatal(err)
		}
		if got := resume(backup); !bytes.Equal(got, want) {
			t.Fatalf("cut at %d, resumed from %s: the model differs from the uninterrupted run's", cut, names[0])
		}
	}
}

// TrainedBytes is what a ResumeCuts train function returns for the model
// and error Train gave under checkpoints ck (nil: none): the model's bytes
// and err. It fails t where ck was switched off, which would leave
// nothing resumed to compare, or where no model came back.
func TrainedBytes(t *testing.T, ck *algo.Checkpoints, model algo.Model, err error) ([]byte, error) {
	t.Helper()
	if ck != nil && ck.Disabled() != "" {
		t.Fatalf("checkpoints off: %s", ck.Disabled())
	}
	if model == nil {
		t.Fatalf("no model: %v", err)
	}
	return ModelBytes(t, model), err
}

// CutAt is a run's logger that cancels the run once a report reaches env
// step at: a Ctrl-C the run sees after that report.
func CutAt(at int64, cancel context.CancelFunc) algo.Logger {
	return cutLog{Logger: algo.Discard(), at: at, cancel: cancel}
}

type cutLog struct {
	algo.Logger
	at     int64
	cancel context.CancelFunc
}

func (l cutLog) Step(step int64) {
	if step >= l.at {
		l.cancel()
	}
}
