package pal

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/algotest"
	"herd/algo/dqn"
	"herd/algo/sac"
	"herd/algo/td3"
	"herd/env"
	"herd/internal/trainstate"
	"herd/metrics"
)

// TestResumeContinues: a PAL run (DQN on CartPole, TD3 and SAC on
// Pendulum, two actors; one learner, or two in either learner mode)
// stopped after its first periodic checkpoint and
// resumed with `herd train --resume` (algo.TrainRun, DirResume) completes
// its step
// budget: metrics.csv's steps strictly increase with no row repeated or
// missing across the cut, summary.json says where it resumed from, and
// the learner's update count continues from the checkpoint's (the
// schedule's total at the end, not that less the updates before the
// cut; with two learners, every update applied exactly once by the
// parameter service). Resumed without the replay section, or with two
// learners without a gradient learner's, the run is refused naming it,
// rather than continued from an empty replay or fresh streams.
func TestResumeContinues(t *testing.T) {
	td3File := "algo: td3\nenv: Pendulum-v1\nseed: 1\nsteps: 600\nruntime: {executor: pal, actors: 2, max_lag: 8}\ntd3: {num_envs: 2, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n"
	sacFile := "algo: sac\nenv: Pendulum-v1\nseed: 1\nsteps: 600\nruntime: {executor: pal, actors: 2, max_lag: 8}\nsac: {num_envs: 1, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n"
	dqnFile := strings.Replace(dqnFile, "actors: 2}", "actors: 2, max_lag: 8}", 1)
	learners := func(file, mode string) string {
		return strings.Replace(file, "max_lag: 8}", "max_lag: 8, learners: 2, learner_mode: "+mode+"}", 1)
	}
	for _, c := range []struct {
		name        string
		spec        algo.Spec
		file        string
		every, log  int64
		wantUpdates uint64
	}{
		{"dqn", dqn.Spec(), dqnFile, 600, 50, 150},
		{"td3", td3.Spec(), td3File, 300, 20, 400},
		{"sac", sac.Spec(), sacFile, 300, 20, 400},
		{"dqn/learners=2/async", dqn.Spec(), learners(dqnFile, ModeAsync), 600, 50, 150},
		{"dqn/learners=2/sync", dqn.Spec(), learners(dqnFile, ModeSync), 600, 50, 150},
		{"td3/learners=2/sync", td3.Spec(), learners(td3File, ModeSync), 300, 20, 400},
		{"sac/learners=2/async", sac.Spec(), learners(sacFile, ModeAsync), 300, 20, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			res := resolve(t, c.spec, c.file)
			res.Header.Out, res.Header.CheckpointEvery, res.Header.LogEvery = out, c.every, c.log
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			exs := []algo.Executor{Executor()}
			_, err := algo.TrainRun(ctx, res, algo.RunOptions{Executors: exs, Checkpointed: func(ci algo.CheckpointInfo) {
				if ci.Step >= c.every {
					cancel()
				}
			}})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cut run: %v, want an interruption", err)
			}
			key, err := algo.ResumeConfig(res)
			if err != nil {
				t.Fatal(err)
			}
			h := res.Header
			st, _, _, err := algo.LoadCheckpoint(filepath.Join(out, algo.CheckpointDir), h.Algo, h.Env, key)
			if err != nil {
				t.Fatal(err)
			}
			cut := st.Header.Step
			if cut < c.every || cut >= h.Steps {
				t.Fatalf("the cut run's newest checkpoint is at step %d", cut)
			}

			// The learner's update count continues from the checkpoint.
			var stats Stats
			opt := OptionsOf(h)
			opt.Stats = &stats
			ck := algo.NewCheckpoints(algo.CheckpointOptions{Dir: t.TempDir(), Every: c.every, Algo: h.Algo, Env: h.Env, Config: key})
			ck.Resume(st)
			if _, err := Train(context.Background(), &algo.Runtime{Header: h, Log: algo.Discard(), Checkpoints: ck}, res.Spec, res.Config, opt); err != nil {
				t.Fatal(err)
			}
			if stats.Updates != c.wantUpdates || stats.EnvSteps != h.Steps || h.Runtime.Learners > 1 && stats.Applies == 0 {
				t.Errorf("resumed from step %d: %d updates (%d applied by the service), %d env steps; want %d, %d",
					cut, stats.Updates, stats.Applies, stats.EnvSteps, c.wantUpdates, h.Steps)
			}

			// Without its replay (or a gradient learner's streams), the
			// checkpoint is refused by name.
			missing := []string{secReplay}
			if h.Runtime.Learners > 1 {
				missing = append(missing, secSlot+"1/")
			}
			for _, name := range missing {
				part := &trainstate.State{Header: st.Header, Sections: map[string][]byte{}}
				for k, b := range st.Sections {
					if !strings.HasPrefix(k, name) {
						part.Sections[k] = b
					}
				}
				ck = algo.NewCheckpoints(algo.CheckpointOptions{Dir: t.TempDir(), Algo: h.Algo, Env: h.Env, Config: key})
				ck.Resume(part)
				if m, err := Train(context.Background(), &algo.Runtime{Header: h, Log: algo.Discard(), Checkpoints: ck}, res.Spec, res.Config,
					OptionsOf(h)); m != nil || err == nil || !strings.Contains(err.Error(), name) {
					t.Errorf("without section %s: model %v, error %v; want a refusal naming it", name, m != nil, err)
				}
			}

			var from int64 = -1
			sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: exs, Dir: algo.DirResume,
				Resumed: func(step int64, _ string, _ []string) { from = step }})
			if err != nil {
				t.Fatal(err)
			}
			if from != cut || sum.Steps != h.Steps || sum.ResumedFromStep == nil || *sum.ResumedFromStep != cut {
				t.Fatalf("resumed from %d (checkpoint %d), %d steps of %d, resumed_from_step %v", from, cut, sum.Steps, h.Steps, sum.ResumedFromStep)
			}
			disk, err := metrics.ReadSummary(filepath.Join(out, algo.SummaryFile))
			if err != nil || disk.ResumedFromStep == nil || *disk.ResumedFromStep != cut || disk.Checkpoints != "on" {
				t.Fatalf("summary.json: %v, resumed_from_step %v, checkpoints %q", err, disk.ResumedFromStep, disk.Checkpoints)
			}
			steps := metricSteps(t, filepath.Join(out, algo.MetricsFile))
			if len(steps) == 0 || steps[len(steps)-1] != h.Steps {
				t.Fatalf("metrics.csv steps %v end short of %d", steps, h.Steps)
			}
			for i := 1; i < len(steps); i++ {
				if steps[i] <= steps[i-1] {
					t.Fatalf("metrics.csv steps %d then %d (around the cut at %d)", steps[i-1], steps[i], cut)
				}
			}
			// max_lag 8 keeps the learner's steps closer together than
			// log_every, so each log_every interval from the first holds exactly one row.
			for i, s := range steps {
				if s/h.LogEvery != int64(i)+1 {
					t.Fatalf("metrics.csv row %d is at step %d (log_every %d, cut at %d): a row missing or repeated; steps %v", i, s, h.LogEvery, cut, steps)
				}
			}
		})
	}
}

// metricSteps returns the step column of a metrics.csv.
func metricSteps(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) < 1 {
		t.Fatalf("%s: %v", path, err)
	}
	col := -1
	for i, name := range rows[0] {
		if name == "step" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("%s has no step column: %v", path, rows[0])
	}
	var steps []int64
	for _, r := range rows[1:] {
		s, err := strconv.ParseInt(r[col], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, s)
	}
	return steps
}

// TestResumeActorContinues: a PAL actor restored from a checkpoint
// continues its envs' episodes and its exploration where the saved actor
// stood, here TD3's Ornstein–Uhlenbeck noise (noise_type: ou) on
// Pendulum: stepped on from the checkpoint with the same weights, the
// restored actor takes the saved actor's actions bit for bit. It fails if
// the OU state, an env's state, the next observations or the sampler's
// stream are left out (the OU noise restarting from 0 gives other
// actions).
func TestResumeActorContinues(t *testing.T) {
	res := resolve(t, td3.Spec(), "algo: td3\nenv: Pendulum-v1\nseed: 1\nsteps: 600\nruntime: {executor: pal, actors: 2}\n"+
		"td3: {num_envs: 2, batch_size: 16, learning_starts: 0, net_arch: [8, 8], noise_type: ou}\n")
	h := res.Header
	newActorAt := func(id int) *actor {
		t.Helper()
		v, err := h.Envs.MakeVector(h.Env, 2, env.Sync, env.WithEpisodeStatistics())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		p, err := res.Spec.Pieces(h, res.Config, algo.SpacesOf(v))
		if err != nil {
			t.Fatal(err)
		}
		a, err := newActor(id, h.Seed, v, p, nil, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := actorsSaveable([]*actor{a}); err != nil {
			t.Fatal(err)
		}
		return a
	}
	step := func(a *actor, from int64, n int) []float32 {
		t.Helper()
		var acts []float32
		for k := range n {
			if err := a.loop.Step(from+int64(2*k), &a.tr); err != nil {
				t.Fatal(err)
			}
			acts = append(acts, a.loop.Acts.Actions...)
		}
		return acts
	}
	saved := newActorAt(1)
	if err := saved.loop.Reset(saved.resetSeed); err != nil {
		t.Fatal(err)
	}
	step(saved, 0, 30)
	out := map[string][]byte{}
	if err := saveActor(saved, out); err != nil {
		t.Fatal(err)
	}
	st := &trainstate.State{Sections: out}
	if err := st.Put("stream", saved.stream); err != nil {
		t.Fatal(err)
	}
	if _, ok := out[actorSection(saved, partSampler)]; !ok {
		t.Fatal("no OU noise section")
	}
	want := step(saved, 60, 10)

	restored := newActorAt(1)
	if err := restoreActor(restored, st); err != nil {
		t.Fatal(err)
	}
	if err := st.Get("stream", restored.stream); err != nil {
		t.Fatal(err)
	}
	if !restored.restored {
		t.Fatal("the actor is not marked restored: its envs would be reset")
	}
	if got := step(restored, 60, 10); !slices.Equal(got, want) {
		t.Fatalf("restored actor's actions %v, the saved actor's %v", got[:4], want[:4])
	}
	// A checkpoint lacking the noise is refused by name.
	delete(st.Sections, actorSection(saved, partSampler))
	if err := restoreActor(newActorAt(1), st); err == nil || !strings.Contains(err.Error(), partSampler) {
		t.Errorf("without the OU noise: %v, want a refusal naming it", err)
	}
}

// TestResumeRestartsEnvs: PAL DQN on LunarLander, whose Box2D worlds
// cannot be saved, checkpoints all but the actors' envs; resumed twice,
// it completes with every metrics.csv step once and counts the envs
// (two actors of two) each resume restarted.
func TestResumeRestartsEnvs(t *testing.T) {
	algotest.ResumeRestarts(t, func(out string) *algo.Resolved {
		cfg := fmt.Sprintf("algo: dqn\nenv: LunarLander-v3\nseed: 5\nsteps: 1200\nlog_every: 100\ncheckpoint_every: 300\nout: %s\n"+
			"runtime: {executor: pal, actors: 2, max_lag: 8}\ndqn: {num_envs: 2, buffer_size: 500, learning_starts: 200, batch_size: 16, train_frequency: 4, net_arch: [8, 8]}\n", out)
		return resolve(t, dqn.Spec(), cfg)
	}, algo.RunOptions{Executors: []algo.Executor{Executor()}}, 4, [2]int64{300, 800})
}
