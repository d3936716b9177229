package hts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"herd/algo"
	"herd/algo/a2c"
	"herd/algo/algotest"
	"herd/algo/ppo"
	"herd/internal/trainstate"
)

// stopAt is a Logger that cancels the run once the metrics step reaches
// at: with now, at that barrier (before its check); otherwise from
// another goroutine, which lands while the next segment is gathered and
// the update is learned.
type stopAt struct {
	at     int64
	now    bool
	cancel context.CancelFunc
}

func (s *stopAt) Episode(int64, float64, int) {}
func (s *stopAt) Scalar(string, float64)      {}
func (s *stopAt) Step(step int64) {
	if step >= s.at {
		if s.now {
			s.cancel()
		} else {
			go s.cancel()
		}
	}
}

// trainCK runs res under HTS with E env workers (and 2 policy workers)
// and checkpoints ck, stopping as stop says (nil: never), and returns the
// model's bytes and Train's error.
func trainCK(t *testing.T, res *algo.Resolved, e int, ck *algo.Checkpoints, stop *stopAt) ([]byte, error) {
	t.Helper()
	return trainOpt(t, res, Options{EnvWorkers: e, PolicyWorkers: 2}, ck, stop)
}

// trainOpt is trainCK with the workers of opt.
func trainOpt(t *testing.T, res *algo.Resolved, opt Options, ck *algo.Checkpoints, stop *stopAt) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log algo.Logger = algo.Discard()
	if stop != nil {
		stop.cancel = cancel
		log = stop
	}
	m, err := Train(ctx, &algo.Runtime{Header: res.Header, Log: log, Checkpoints: ck}, res.Spec, res.Config, opt)
	if m == nil {
		t.Fatalf("no model: %v", err)
	}
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := m.Save(p); err != nil {
		t.Fatal(err)
	}
	b, rerr := os.ReadFile(p)
	if rerr != nil {
		t.Fatal(rerr)
	}
	return b, err
}

// TestResumeBitIdentical: PPO and A2C under HTS (4 envs, segments of 32
// steps, 10 segments), with 1 and 2 env workers, end with the uninterrupted
// run's model bytes when resumed from any checkpoint: the one a stop
// writes early (at the first barrier), mid-run (a stop arriving while a
// segment is gathered and an update learned) and just after a periodic
// checkpoint, and each checkpoint a SIGKILL would leave as the newest (the
// run's every checkpoint, kept). A checkpoint of E = 2 is resumed with
// E = 1 too: the state belongs to env slots, not workers. It fails if a
// piece of the double buffer's state is left out: the segment gathered
// and not learned, the delayed gradient's θ_{k−1}, an env's sampler
// stream, state or next observation, the learner's optimizer or PPO's
// minibatch order.
func TestResumeBitIdentical(t *testing.T) {
	for _, c := range []struct {
		spec algo.Spec
		file string
	}{
		{ppo.Spec(), ppoFile},
		{a2c.Spec(), "algo: a2c\nenv: CartPole-v1\nseed: 3\nsteps: 1280\nruntime: {executor: hts}\na2c: {num_envs: 4, num_steps: 32}\n"},
	} {
		t.Run(c.spec.Name, func(t *testing.T) {
			res := resolve(t, c.spec, c.file)
			res.Header.Steps = 1280 // 10 segments
			h := res.Header
			seg := h.Steps / 10 // one segment's env steps
			rig := newResumeRig(t, res, 3*seg)
			newCK := rig.checkpoints
			want, err := trainCK(t, res, 2, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			resume := func(dir string, e int) []byte {
				t.Helper()
				return rig.resume(dir, Options{EnvWorkers: e, PolicyWorkers: 2})
			}
			for _, e := range []int{1, 2} {
				// Killed: the newest checkpoint is any of the run's.
				all := t.TempDir()
				if got, err := trainCK(t, res, e, newCK(all, 100), nil); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("E=%d with checkpoints: %v, same model %v", e, err, bytes.Equal(got, want))
				}
				names := checkpointNames(t, all)
				if len(names) != 4 { // segments 3, 6, 9 (periodic) and 10 (the end)
					t.Fatalf("E=%d: checkpoints %v", e, names)
				}
				for i := range names {
					if got := resume(killedAfter(t, all, names[:i+1]), e); !bytes.Equal(got, want) {
						t.Fatalf("E=%d, killed after %s: the resumed model differs from the uninterrupted run's", e, names[i])
					}
				}
				// Stopped: early, mid-run, just after a checkpoint.
				for _, stop := range []*stopAt{{at: seg, now: true}, {at: 4 * seg}, {at: 6 * seg, now: true}, {at: 6 * seg}} {
					dir := t.TempDir()
					if _, err := trainCK(t, res, e, newCK(dir, 2), stop); !errors.Is(err, context.Canceled) {
						t.Fatalf("E=%d, stopped at %d: %v, want context.Canceled", e, stop.at, err)
					}
					for _, re := range []int{e, 1} {
						if got := resume(dir, re); !bytes.Equal(got, want) {
							t.Fatalf("E=%d, stopped at %d (now %v), resumed with E=%d from %v: the model differs from the uninterrupted run's",
								e, stop.at, stop.now, re, checkpointNames(t, dir))
						}
					}
				}
			}
		})
	}
}

// TestResumeRefusesWithoutState: a checkpoint that lacks the delayed
// gradient's θ_{k−1} (or the segment not yet learned) is refused, naming
// the section, rather than resumed to other bits.
func TestResumeRefusesWithoutState(t *testing.T) {
	res := resolve(t, ppo.Spec(), ppoFile)
	h := res.Header
	key, err := algo.ResumeConfig(res)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ck := algo.NewCheckpoints(algo.CheckpointOptions{Dir: dir, Every: 3 * 128, Keep: 1, Algo: h.Algo, Env: h.Env, Config: key})
	if _, err := trainCK(t, res, 2, ck, &stopAt{at: 4 * 128, now: true}); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	for _, sec := range []string{"learner/behind", secSegment, secObs, secSampler + "3", secEnv + "0"} {
		st, _, _, err := algo.LoadCheckpoint(dir, h.Algo, h.Env, key)
		if err != nil {
			t.Fatal(err)
		}
		delete(st.Sections, sec)
		ck := algo.NewCheckpoints(algo.CheckpointOptions{Dir: t.TempDir(), Algo: h.Algo, Env: h.Env, Config: key})
		ck.Resume(st)
		m, err := Train(context.Background(), &algo.Runtime{Header: h, Log: algo.Discard(), Checkpoints: ck}, res.Spec, res.Config, Options{})
		if err == nil || m != nil || !bytes.Contains([]byte(err.Error()), []byte(sec)) {
			t.Errorf("without section %s: model %v, error %v; want a refusal naming it", sec, m, err)
		}
	}
}

// resumeRig makes the checkpoints of an HTS run of res, every `every`
// env steps, and resumes it.
type resumeRig struct {
	t     *testing.T
	res   *algo.Resolved
	key   []byte
	every int64
}

func newResumeRig(t *testing.T, res *algo.Resolved, every int64) *resumeRig {
	t.Helper()
	key, err := algo.ResumeConfig(res)
	if err != nil {
		t.Fatal(err)
	}
	return &resumeRig{t: t, res: res, key: key, every: every}
}

// checkpoints writes into dir, keeping keep.
func (r *resumeRig) checkpoints(dir string, keep int) *algo.Checkpoints {
	h := r.res.Header
	return algo.NewCheckpoints(algo.CheckpointOptions{Dir: dir, Every: r.every, Keep: keep, Algo: h.Algo, Env: h.Env, Config: r.key})
}

// resume trains the run to its end from dir's newest checkpoint with the
// workers of opt and returns the model's bytes.
func (r *resumeRig) resume(dir string, opt Options) []byte {
	r.t.Helper()
	h := r.res.Header
	st, _, _, err := algo.LoadCheckpoint(dir, h.Algo, h.Env, r.key)
	if err != nil {
		r.t.Fatal(err)
	}
	ck := r.checkpoints(r.t.TempDir(), 2)
	ck.Resume(st)
	got, err := trainOpt(r.t, r.res, opt, ck, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return got
}

// killedAfter returns a new directory holding the checkpoints names of
// all: what a run killed after writing the last of them leaves.
func killedAfter(t *testing.T, all string, names []string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(all, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkpointNames lists the checkpoint files in dir, oldest first.
func checkpointNames(t *testing.T, dir string) []string {
	t.Helper()
	names, err := trainstate.Dir{Path: dir}.List()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// BenchmarkCheckpoint measures the checkpoints of an HTS PPO CartPole run
// with the default PPO settings (4 envs × 128 steps, 64-64 networks, Adam;
// one env worker per env) through TrainRun. One op is one run of 100
// segments (51,200 steps): every=512 checkpoints at every barrier,
// every=default at the last one only, so the difference of their ns/op is
// the cost of 99 checkpoints. ckpt-ms and ckpt-bytes are per checkpoint:
// gathering the state (the learner's, the segment not yet learned, the
// envs and their streams, the metrics recorder's) and writing it.
func BenchmarkCheckpoint(b *testing.B) {
	algotest.CheckpointBench(b, ppo.Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 51200\nruntime: {executor: hts}\n", "512", Executor())
}

// TestResumeRestartsEnvs: PPO under HTS on LunarLander, whose Box2D world
// cannot be saved, checkpoints all else at its barriers; resumed twice,
// it completes with every metrics.csv step once and counts the envs it
// restarted.
func TestResumeRestartsEnvs(t *testing.T) {
	algotest.ResumeRestarts(t, func(out string) *algo.Resolved {
		cfg := fmt.Sprintf("algo: ppo\nenv: LunarLander-v3\nseed: 5\nsteps: 1536\nlog_every: 128\ncheckpoint_every: 300\nout: %s\n"+
			"runtime: {executor: hts}\nppo: {num_envs: 2, num_steps: 64, update_epochs: 1}\n", out)
		res, err := algo.Resolve([]byte(cfg), []algo.Spec{ppo.Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}, algo.RunOptions{Executors: []algo.Executor{Executor()}}, 2, [2]int64{300, 900})
}
