package offpolicy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/algotest"
	"herd/algo/ddpg"
	"herd/algo/dqn"
	"herd/algo/internal/learntest"
	"herd/algo/sac"
	"herd/algo/td3"
	"herd/env"
	"herd/internal/trainstate"
	"herd/metrics"
)

// cutVector cancels the run's context once `at` env steps have been taken:
// a Ctrl-C arriving while that vector step's updates run.
type cutVector struct {
	*env.SyncVector
	at, steps int64
	cancel    context.CancelFunc
}

func (v *cutVector) Step(actions []float32) (*env.Batch, error) {
	v.steps += int64(v.NumEnvs())
	if v.steps >= v.at {
		v.cancel()
	}
	return v.SyncVector.Step(actions)
}

// train runs res's Train with checkpoints ck (nil: none), cutting the run
// at env step cut (0: never), and returns the model's bytes and Train's
// error.
func train(t *testing.T, res *algo.Resolved, ck *algo.Checkpoints, cut int64) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := &algo.Runtime{Header: res.Header, Log: algo.Discard(), Checkpoints: ck}
	if cut > 0 {
		rt.Envs = func(n int) (env.Vector, error) {
			v, err := env.MakeVector(res.Header.Env, n, env.Sync, env.WithEpisodeStatistics())
			if err != nil {
				return nil, err
			}
			return &cutVector{SyncVector: v.(*env.SyncVector), at: cut, cancel: cancel}, nil
		}
	}
	model, err := res.Spec.Train(ctx, rt, res.Config)
	if model == nil {
		t.Fatalf("no model: %v", err)
	}
	return learntest.ModelBytes(t, model), err
}

// resumeCases are short seeded runs of every off-policy algorithm whose
// replay wraps (buffer smaller than the run).
var resumeCases = []struct {
	name    string
	spec    algo.Spec
	env     string
	section string
	cuts    []int64 // early, mid-run, just after a checkpoint
}{
	{"dqn-uniform", dqn.Spec(), "CartPole-v1", "  buffer_size: 500\n  learning_starts: 200\n  batch_size: 32\n  train_frequency: 4\n" +
		"  target_network_frequency: 100\n  net_arch: [16, 16]\n  exploration_fraction: 0.6\n", []int64{150, 702, 601}},
	{"dqn-prioritized", dqn.Spec(), "CartPole-v1", "  num_envs: 2\n  buffer_size: 500\n  learning_starts: 200\n  batch_size: 32\n  train_frequency: 4\n" +
		"  target_network_frequency: 100\n  net_arch: [16, 16]\n  prioritized: true\n  double_q: true\n  n_steps: 3\n  loss: huber\n  anneal_lr: true\n",
		[]int64{150, 706, 602}},
	{"sac", sac.Spec(), "Pendulum-v1", "  buffer_size: 500\n  learning_starts: 200\n  batch_size: 32\n  net_arch: [16, 16]\n" +
		"  policy_frequency: 3\n  target_network_frequency: 2\n", []int64{150, 701, 601}},
	{"td3-ou", td3.Spec(), "Pendulum-v1", "  buffer_size: 500\n  learning_starts: 200\n  batch_size: 32\n  net_arch: [16, 16]\n" +
		"  noise_type: ou\n  policy_frequency: 3\n", []int64{150, 701, 601}},
	{"dqn-minatar", dqn.Spec(), "MinAtar/Breakout-v0", "  encoder: minatar\n  net_arch: [32]\n  optimizer: rmsprop\n  rmsprop_centered: true\n" +
		"  loss: huber\n  buffer_size: 500\n  learning_starts: 200\n  batch_size: 8\n  train_frequency: 4\n  target_network_frequency: 100\n",
		[]int64{150, 702, 601}},
	{"ddpg", ddpg.Spec(), "Pendulum-v1", "  buffer_size: 500\n  learning_starts: 200\n  batch_size: 32\n  net_arch: [16, 16]\n",
		[]int64{701}},
}

const resumeSteps = 1200

// TestResumeBitIdentical is onpolicy's test for the off-policy algorithms:
// DQN (uniform replay; prioritized with double Q, 3-step returns and
// Huber loss; on MinAtar Breakout, whose game state and NumPy-compatible
// stream the checkpoint holds), SAC, TD3 (with OU noise) and DDPG, each cut early (before
// learning starts), mid-run (at a step between two training rounds or,
// for the per-step learners, inside the delayed actor's period) and just
// after a periodic checkpoint, then resumed from the checkpoint the cut
// wrote, end with the same model bytes as the run never cut; each cut is
// resumed again as if the process had been SIGKILLed (its own checkpoint
// lost, the steps since the periodic one before it taken again). Every
// replay wraps (buffer smaller than the run), so eviction, the sum tree
// and the running maximum priority are exercised. It fails if a piece of
// state is left out of a checkpoint: a random stream (replay sampling,
// exploration, the learner's noise), the replay's contents or priorities,
// the n-step accumulators, the OU noise, the optimizers, the target
// networks, a counter, the envs or the loop's observations.
func TestResumeBitIdentical(t *testing.T) {
	for _, c := range resumeCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := fmt.Sprintf("algo: %s\nenv: %s\nseed: 3\nsteps: %d\n%s:\n%s", c.spec.Name, c.env, resumeSteps, c.spec.Name, c.section)
			res, err := algo.Resolve([]byte(cfg), []algo.Spec{c.spec}, algo.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			learntest.ResumeCuts(t, res, 300, c.cuts, func(ck *algo.Checkpoints, cut int64) ([]byte, error) {
				return train(t, res, ck, cut)
			})
		})
	}
}

// listDir lists the checkpoint files in dir, oldest first.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	names, err := trainstate.Dir{Path: dir}.List()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestResumeTrainRunFiles: through TrainRun (what `herd train --resume`
// runs), each off-policy run interrupted just after its checkpoint at step
// 600, resumed, ends with the same model.safetensors and the same
// metrics.csv rows (wall-clock columns aside) as the run never
// interrupted; so does the run resumed as if it had been killed instead
// (its newest checkpoint gone: the steps since 300 taken again, their rows
// rewritten), and the run whose newest checkpoint was cut short (a
// truncated file: skipped, said so, set aside as .damaged, and the one
// before it used). The metrics section carries the last-100 window
// and the pending row; the learners carry the scalars they log between
// their updates (the actor's last loss, α).
func TestResumeTrainRunFiles(t *testing.T) {
	for _, c := range resumeCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			resolve := func(out string) *algo.Resolved {
				cfg := fmt.Sprintf("algo: %s\nenv: %s\nseed: 4\nsteps: %d\nlog_every: 50\ncheckpoint_every: 300\ncheckpoint_keep: 2\nout: %s\n%s:\n%s",
					c.spec.Name, c.env, resumeSteps, out, c.spec.Name, c.section)
				res, err := algo.Resolve([]byte(cfg), []algo.Spec{c.spec}, algo.Overrides{})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			whole := filepath.Join(root, "whole")
			if _, err := algo.TrainRun(context.Background(), resolve(whole), algo.RunOptions{}); err != nil {
				t.Fatal(err)
			}
			files := func(dir string) (model []byte, rows string) {
				t.Helper()
				model, _ = os.ReadFile(filepath.Join(dir, algo.ModelFile))
				m, err := os.ReadFile(filepath.Join(dir, "metrics.csv"))
				if err != nil {
					t.Fatal(err)
				}
				if rows, err = metrics.DropWallColumns(m); err != nil {
					t.Fatal(err)
				}
				return model, rows
			}
			wantModel, wantRows := files(whole)
			for _, how := range []string{"interrupted", "killed", "truncated"} {
				out := filepath.Join(root, how)
				ctx, cancel := context.WithCancel(context.Background())
				_, err := algo.TrainRun(ctx, resolve(out), algo.RunOptions{Checkpointed: func(ci algo.CheckpointInfo) {
					if ci.Step >= 600 {
						cancel()
					}
				}})
				cancel()
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("interrupted run: %v", err)
				}
				names := listDir(t, filepath.Join(out, algo.CheckpointDir))
				if len(names) != 2 || names[1] != "state-000000000000600.herdstate" {
					t.Fatalf("checkpoints %v", names)
				}
				newest := filepath.Join(out, algo.CheckpointDir, names[1])
				switch how {
				case "killed":
					os.Remove(newest)
				case "truncated":
					b, _ := os.ReadFile(newest)
					os.WriteFile(newest, b[:len(b)/2], 0o644)
				}
				var from int64
				var skipped []string
				s, err := algo.TrainRun(context.Background(), resolve(out), algo.RunOptions{Dir: algo.DirResume,
					Resumed: func(step int64, _ string, sk []string) { from, skipped = step, sk }})
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]int64{"interrupted": 600, "killed": 300, "truncated": 300}[how]
				if from != want || s.ResumedFromStep == nil || *s.ResumedFromStep != want {
					t.Fatalf("%s: resumed from %d (summary %v), want %d", how, from, s.ResumedFromStep, want)
				}
				if how == "truncated" {
					if len(skipped) != 1 || !strings.Contains(skipped[0], names[1]) {
						t.Fatalf("truncated: skipped %v", skipped)
					}
					if _, err := os.Stat(newest + ".damaged"); err != nil {
						t.Fatalf("truncated: not set aside: %v", err)
					}
				}
				model, rows := files(out)
				if !bytes.Equal(model, wantModel) {
					t.Errorf("%s: model.safetensors differs from the uninterrupted run's", how)
				}
				if rows != wantRows {
					t.Errorf("%s: metrics.csv differs:\n%s\nuninterrupted:\n%s", how, rows, wantRows)
				}
			}
		})
	}
}

// TestResumeRestartsEnvs: DQN on LunarLander (3-step returns, so the
// assembler has steps pending at each checkpoint), whose Box2D world cannot
// be saved, checkpoints all else; resumed twice, it completes with every
// metrics.csv step once and counts the envs it restarted.
func TestResumeRestartsEnvs(t *testing.T) {
	algotest.ResumeRestarts(t, func(out string) *algo.Resolved {
		cfg := fmt.Sprintf("algo: dqn\nenv: LunarLander-v3\nseed: 5\nsteps: 1200\nlog_every: 100\ncheckpoint_every: 300\nout: %s\n"+
			"dqn:\n  num_envs: 2\n  buffer_size: 500\n  learning_starts: 200\n  batch_size: 32\n  train_frequency: 4\n  net_arch: [16, 16]\n  n_steps: 3\n", out)
		res, err := algo.Resolve([]byte(cfg), []algo.Spec{dqn.Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}, algo.RunOptions{}, 2, [2]int64{300, 800})
}
