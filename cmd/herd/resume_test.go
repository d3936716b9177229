package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/metrics"
)

// resumeConfig is a short seeded PPO run with a checkpoint every 2048 env
// steps, which no rollout of 4 × 96 = 384 steps divides.
const resumeConfig = `algo: ppo
env: CartPole-v1
seed: 5
steps: 122880
log_every: 1000
checkpoint_every: 2048
checkpoint_keep: 2
ppo:
  num_envs: 4
  num_steps: 96
`

// sameRun fails unless the run in got ended with the model.safetensors
// bytes and the metrics.csv rows (wall-clock columns aside) of the run in
// want.
func sameRun(t *testing.T, want, got string) {
	t.Helper()
	wb, _ := os.ReadFile(filepath.Join(want, "model.safetensors"))
	gb, _ := os.ReadFile(filepath.Join(got, "model.safetensors"))
	if len(wb) == 0 || !bytes.Equal(gb, wb) {
		t.Fatal("the resumed run's model.safetensors differs from the uninterrupted run's")
	}
	wm, _ := os.ReadFile(filepath.Join(want, "metrics.csv"))
	gm, _ := os.ReadFile(filepath.Join(got, "metrics.csv"))
	ws, err1 := metrics.DropWallColumns(wm)
	gs, err2 := metrics.DropWallColumns(gm)
	if err1 != nil || err2 != nil || ws != gs {
		t.Fatalf("metrics.csv differs (%v, %v):\n%s\nresumed:\n%s", err1, err2, ws, gs)
	}
}

// checkpointsIn lists the checkpoint files of the run in out.
func checkpointsIn(out string) []string {
	ents, _ := os.ReadDir(filepath.Join(out, "checkpoints"))
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".herdstate") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// TestCLIResumeAfterSIGTERMAndSIGKILL: a herd train stopped by SIGTERM
// (status 130, a checkpoint written on the way out), resumed, then killed
// with SIGKILL mid-run (its newest periodic checkpoint is all that is
// left; the files of the run being written are lost) and resumed again,
// ends with the same model.safetensors bytes and the same metrics.csv
// rows, wall-clock columns aside, as the run never stopped; summary.json
// records the step it resumed from. A resume with a changed setting, or of
// another algorithm, is refused naming the difference and changes
// nothing.
func TestCLIResumeAfterSIGTERMAndSIGKILL(t *testing.T) {
	dir := t.TempDir()
	a2c := strings.Replace(strings.Replace(resumeConfig, "algo: ppo", "algo: a2c", 1), "ppo:", "a2c:", 1)
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(resumeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a2c.yaml"), []byte(a2c), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(out string, more ...string) []string {
		return append([]string{"train", "--config", "c.yaml", "--quiet", "--out", out}, more...)
	}
	if r := herd(t, dir, args("whole")...); r.code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", r.code, r.stderr)
	}
	out := filepath.Join(dir, "cut")
	newer := func(than []string) func() bool {
		return func() bool {
			now := checkpointsIn(out)
			return len(now) > 0 && (len(than) == 0 || now[len(now)-1] > than[len(than)-1])
		}
	}

	// SIGTERM once the first checkpoint is there.
	cmd, so, se := start(t, dir, args("cut")...)
	waitFor(t, "a first checkpoint", newer(nil))
	cmd.Process.Signal(syscall.SIGTERM)
	if r := finish(t, cmd, so, se, time.Minute); r.code != 130 {
		t.Fatalf("SIGTERM: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s, err := metrics.ReadSummary(filepath.Join(out, "summary.json"))
	if err != nil || s.Status != metrics.StatusInterrupted {
		t.Fatalf("after SIGTERM: %+v %v", s, err)
	}
	if s.Steps >= 122880 {
		t.Skip("the run ended before SIGTERM reached it")
	}

	// A changed setting or another algorithm: refused, nothing changed.
	before := checkpointsIn(out)
	summary, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	for _, c := range []struct{ more, want []string }{
		{[]string{"--set", "learning_rate=1e-3"}, []string{"cannot resume", "ppo.learning_rate 0.00025 (this run: 0.001)"}},
		{[]string{"--set", "num_envs=8", "--seed", "6"}, []string{"ppo.num_envs 4 (this run: 8)", "seed 5 (this run: 6)"}},
		{[]string{"--config", "a2c.yaml"}, []string{"algorithm ppo, not a2c"}},
		{[]string{"--env", "Acrobot-v1"}, []string{"env CartPole-v1, not Acrobot-v1"}},
	} {
		r := herd(t, dir, args("cut", append(c.more, "--resume")...)...)
		for _, w := range c.want {
			if r.code != 1 || !strings.Contains(r.stderr, w) {
				t.Errorf("--resume %v: exit %d, want 1 and %q in\n%s", c.more, r.code, w, r.stderr)
			}
		}
		after, _ := os.ReadFile(filepath.Join(out, "summary.json"))
		if !slices.Equal(before, checkpointsIn(out)) || !bytes.Equal(summary, after) {
			t.Fatalf("--resume %v changed the run", c.more)
		}
	}

	// Resume, then SIGKILL once it has written a newer checkpoint.
	cmd, so, se = start(t, dir, args("cut", "--resume")...)
	waitFor(t, "a checkpoint after the resume", newer(before))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	finish(t, cmd, so, se, time.Minute)
	if !strings.Contains(so.String(), "resuming from step") {
		t.Fatalf("the resumed run did not say where it resumed:\n%s", so)
	}
	// A kill between a checkpoint's rename and the removal of the oldest
	// leaves one more than checkpoint_keep; the next checkpoint prunes it.
	if len(checkpointsIn(out)) > 3 {
		t.Fatalf("checkpoint_keep 2 kept %v", checkpointsIn(out))
	}

	r := herd(t, dir, args("cut", "--resume")...)
	if r.code != 0 || !strings.Contains(r.stdout, "resuming from step") {
		t.Fatalf("resume after SIGKILL: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	sameRun(t, filepath.Join(dir, "whole"), out)
	s, err = metrics.ReadSummary(filepath.Join(out, "summary.json"))
	if err != nil || s.Status != metrics.StatusCompleted || s.ResumedFromStep == nil || *s.ResumedFromStep <= 0 {
		t.Fatalf("summary %+v, %v", s, err)
	}
	if len(checkpointsIn(out)) > 2 {
		t.Fatalf("checkpoint_keep 2 kept %v after a clean end", checkpointsIn(out))
	}
}

// TestCLIResumeHTSFromRunConfig: an HTS PPO run trained to half its
// budget, then continued with `--resume --out DIR --steps` alone (the
// settings read back from DIR/config.yaml), ends with the model bytes of
// the run trained to the whole budget at once; a flag that changes a
// setting is refused naming each difference, and changes nothing.
func TestCLIResumeHTSFromRunConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := `algo: ppo
env: CartPole-v1
seed: 5
steps: 5120
checkpoint_every: 1024
runtime: {executor: hts, env_workers: 2}
ppo: {num_envs: 4, num_steps: 32, anneal_lr: false}
`
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := herd(t, dir, "train", "--config", "c.yaml", "--quiet", "--out", "whole"); r.code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", r.code, r.stderr)
	}
	if r := herd(t, dir, "train", "--config", "c.yaml", "--quiet", "--out", "half", "--steps", "2560"); r.code != 0 {
		t.Fatalf("half run: exit %d\n%s", r.code, r.stderr)
	}
	before := checkpointsIn(filepath.Join(dir, "half"))
	for _, c := range []struct{ more, want []string }{
		{[]string{"--seed", "6", "--set", "learning_rate=1e-3"}, []string{"seed 5 (this run: 6)", "ppo.learning_rate 0.00025 (this run: 0.001)", "only --steps and --log-every"}},
		{[]string{"--algo", "a2c", "--env", "Acrobot-v1"}, []string{"--algo a2c (the run's: ppo)", "--env Acrobot-v1 (the run's: CartPole-v1)"}},
		{[]string{"--set", "runtime.env_workers=1"}, []string{"runtime.env_workers 2 (this run: 1)"}},
	} {
		r := herd(t, dir, append([]string{"train", "--quiet", "--resume", "--out", "half"}, c.more...)...)
		for _, w := range c.want {
			if r.code != 1 || !strings.Contains(r.stderr, w) {
				t.Errorf("--resume %v: exit %d, want 1 and %q in\n%s", c.more, r.code, w, r.stderr)
			}
		}
		if !slices.Equal(before, checkpointsIn(filepath.Join(dir, "half"))) {
			t.Fatalf("--resume %v changed the run", c.more)
		}
	}
	if r := herd(t, dir, "train", "--quiet", "--resume", "--steps", "5120"); r.code != 1 || !strings.Contains(r.stderr, "needs --out") {
		t.Errorf("--resume without --out or --config: exit %d\n%s", r.code, r.stderr)
	}
	r := herd(t, dir, "train", "--resume", "--out", "half", "--steps", "5120")
	if r.code != 0 || !strings.Contains(r.stdout, "resuming from step 2560") {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "whole", "model.safetensors"))
	got, _ := os.ReadFile(filepath.Join(dir, "half", "model.safetensors"))
	if len(want) == 0 || !bytes.Equal(got, want) {
		t.Fatal("the resumed HTS run's model.safetensors differs from the run trained to the whole budget")
	}
	s, err := metrics.ReadSummary(filepath.Join(dir, "half", "summary.json"))
	if err != nil || s.ResumedFromStep == nil || *s.ResumedFromStep != 2560 || s.Checkpoints != "on" {
		t.Fatalf("summary %+v, %v", s, err)
	}
}

// TestCLIResumeOffPolicyAfterSIGKILL: a prioritized 3-step DQN run killed
// with SIGKILL once it has written a checkpoint (the replay full, learning
// under way), resumed from what was left, ends with the same
// model.safetensors bytes and metrics.csv rows, wall-clock columns aside,
// as the run never killed.
func TestCLIResumeOffPolicyAfterSIGKILL(t *testing.T) {
	resumeAfterSIGKILL(t, `algo: dqn
env: CartPole-v1
seed: 5
steps: 40000
log_every: 1000
checkpoint_every: 4000
checkpoint_keep: 2
dqn:
  buffer_size: 2000
  learning_starts: 1000
  batch_size: 32
  train_frequency: 4
  net_arch: [32, 32]
  prioritized: true
  n_steps: 3
`)
}

// TestCLIResumeAsyncAfterSIGKILL: asynchronous DQN runs — PAL (two
// actors) and Ape-X under flow (two actors with actor priorities) —
// killed with SIGKILL once they have written two checkpoints and resumed
// with --resume complete with exit 0; summary.json says each resumed from
// the newest checkpoint left, and metrics.csv has one row per log_every
// interval up to the budget (PAL's max_lag 8 keeps the learner's steps
// closer together than log_every; Ape-X reports 50 env steps at a time):
// none of the rows the killed process wrote past the checkpoint repeated,
// none missing. Their actors act freely, so the weights are not compared.
func TestCLIResumeAsyncAfterSIGKILL(t *testing.T) {
	for name, runtime := range map[string]string{
		"pal":       "runtime: {executor: pal, actors: 2, max_lag: 8}\ndqn: {",
		"flow-apex": "runtime: {executor: flow, env_workers: 2}\ndqn: {prioritized: true, initial_priorities: actor, ",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := "algo: dqn\nenv: CartPole-v1\nseed: 5\nsteps: 16000\nlog_every: 500\ncheckpoint_every: 2000\ncheckpoint_keep: 2\n" +
				runtime + "buffer_size: 2000, learning_starts: 1000, batch_size: 32, train_frequency: 4, net_arch: [32, 32]}\n"
			if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "run")
			args := []string{"train", "--config", "c.yaml", "--quiet", "--out", "run"}
			killAtSecondCheckpoint(t, dir, out, args...)
			left := checkpointsIn(out)
			var cut int64
			if _, err := fmt.Sscanf(left[len(left)-1], "state-%d.herdstate", &cut); err != nil {
				t.Fatal(err)
			}
			r := herd(t, dir, append(args, "--resume")...)
			if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("resuming from step %d", cut)) {
				t.Fatalf("resume after SIGKILL (newest checkpoint at step %d): exit %d\n%s\n%s", cut, r.code, r.stdout, r.stderr)
			}
			sum, err := metrics.ReadSummary(filepath.Join(out, "summary.json"))
			if err != nil || sum.Status != metrics.StatusCompleted || sum.Steps != 16000 || sum.ResumedFromStep == nil || *sum.ResumedFromStep != cut || sum.Checkpoints != "on" {
				t.Fatalf("summary.json: %v, status %q, %d steps, resumed_from_step %v, checkpoints %q; want completed, 16000, %d, on",
					err, sum.Status, sum.Steps, sum.ResumedFromStep, sum.Checkpoints, cut)
			}
			b, err := os.ReadFile(filepath.Join(out, "metrics.csv"))
			if err != nil {
				t.Fatal(err)
			}
			rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
			if err != nil || len(rows) != 33 || rows[0][0] != "step" {
				t.Fatalf("metrics.csv: %v, %d rows; want a header and 32 rows", err, len(rows))
			}
			for i, row := range rows[1:] {
				if s, err := strconv.ParseInt(row[0], 10, 64); err != nil || s/500 != int64(i)+1 {
					t.Fatalf("metrics.csv row %d at step %s (cut at %d): a row missing or repeated", i, row[0], cut)
				}
			}
		})
	}
}

// TestCLIResumeHTSAndPlansAfterSIGKILL: runs of the executors that keep
// work in flight between checkpoints — PPO under HTS (a segment gathered
// while the previous one is learned), IMPALA and A3C (their plans under
// the local executor: segments and gradients requested ahead of the
// learner), A2C's SyncPlan under flow with a round collected ahead and
// DQN's ReplayPlan under flow (prioritized, 3-step returns, two workers) —
// killed with SIGKILL once they have written two checkpoints and resumed
// from what was left, end with the model.safetensors bytes and
// metrics.csv rows, wall-clock columns aside, of the run never killed.
func TestCLIResumeHTSAndPlansAfterSIGKILL(t *testing.T) {
	for name, cfg := range map[string]string{
		"hts": "algo: ppo\nenv: CartPole-v1\nseed: 5\nsteps: 100000\nlog_every: 2000\ncheckpoint_every: 4096\ncheckpoint_keep: 2\n" +
			"runtime: {executor: hts, env_workers: 2}\nppo: {num_envs: 4, num_steps: 64}\n",
		"hts-lstm": "algo: ppo\nenv: CartPoleNoVel-v1\nseed: 5\nsteps: 60000\nlog_every: 2000\ncheckpoint_every: 4096\ncheckpoint_keep: 2\n" +
			"runtime: {executor: hts, env_workers: 2, policy_workers: 2}\n" +
			"ppo: {num_envs: 4, num_steps: 64, hidden: [16], recurrent: {type: lstm, hidden: 8}}\n",
		"impala": "algo: impala\nenv: CartPole-v1\nseed: 5\nsteps: 200000\nlog_every: 2000\ncheckpoint_every: 4096\ncheckpoint_keep: 2\n" +
			"impala: {num_envs: 4, num_steps: 32}\n",
		"a3c": "algo: a3c\nenv: CartPole-v1\nseed: 5\nsteps: 100000\nlog_every: 2000\ncheckpoint_every: 4096\ncheckpoint_keep: 2\n" +
			"a3c: {num_envs: 4, num_steps: 8}\n",
		"flow": "algo: a2c\nenv: CartPole-v1\nseed: 5\nsteps: 200000\nlog_every: 2000\ncheckpoint_every: 4096\ncheckpoint_keep: 2\n" +
			"runtime: {executor: flow, env_workers: 2, num_async: 2}\na2c: {num_envs: 4, num_steps: 8}\n",
		"flow-dqn": "algo: dqn\nenv: CartPole-v1\nseed: 5\nsteps: 100000\nlog_every: 2000\ncheckpoint_every: 4096\ncheckpoint_keep: 2\n" +
			"runtime: {executor: flow, env_workers: 2}\n" +
			"dqn: {num_envs: 4, buffer_size: 5000, learning_starts: 1000, net_arch: [32, 32], n_steps: 3, prioritized: true}\n",
	} {
		t.Run(name, func(t *testing.T) { resumeAfterSIGKILL(t, cfg) })
	}
}

// TestCLIResumeMultiAgentAfterSIGKILL: a run with two policies on MPE
// simple_tag, PPO for the adversaries and DQN for the good agent, killed
// with SIGKILL once it has written two checkpoints (each at a joint step
// where both policies end an iteration) and resumed from what was left,
// ends with the model.safetensors bytes and metrics.csv rows (each
// policy's and each team's columns included), wall-clock columns aside,
// of the run never killed.
func TestCLIResumeMultiAgentAfterSIGKILL(t *testing.T) {
	resumeAfterSIGKILL(t, `algo: ppo
env: mpe/simple_tag_v3?agent_id=true
seed: 5
steps: 50000
log_every: 2000
checkpoint_every: 8192
checkpoint_keep: 2
multiagent:
  policies: [adversary, good]
  policy_mapping: {adversary_*: adversary, agent_0: good}
  algos: {good: dqn}
ppo: {num_envs: 16, num_steps: 32, hidden: [32], update_epochs: 2}
dqn: {num_envs: 16, learning_starts: 1000, buffer_size: 5000, net_arch: [32]}
`)
}

// resumeAfterSIGKILL trains the run of cfg to its end, and again killed
// with SIGKILL once it has written two checkpoints, then resumed with
// --resume from what was left: both must end with the same
// model.safetensors bytes and metrics.csv rows, wall-clock columns aside.
func resumeAfterSIGKILL(t *testing.T, cfg string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(out string, more ...string) []string {
		return append([]string{"train", "--config", "c.yaml", "--quiet", "--out", out}, more...)
	}
	if r := herd(t, dir, args("whole")...); r.code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", r.code, r.stderr)
	}
	out := filepath.Join(dir, "cut")
	killAtSecondCheckpoint(t, dir, out, args("cut")...)
	r := herd(t, dir, args("cut", "--resume")...)
	if r.code != 0 || !strings.Contains(r.stdout, "resuming from step") {
		t.Fatalf("resume after SIGKILL: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	sameRun(t, filepath.Join(dir, "whole"), out)
}

// killAtSecondCheckpoint starts herd with args in dir and kills it with
// SIGKILL once the run in out has written two checkpoints; the test is
// skipped when the run ended first.
func killAtSecondCheckpoint(t *testing.T, dir, out string, args ...string) {
	t.Helper()
	cmd, so, se := start(t, dir, args...)
	waitFor(t, "a second checkpoint", func() bool { return len(checkpointsIn(out)) >= 2 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	finish(t, cmd, so, se, time.Minute)
	if _, err := os.Stat(filepath.Join(out, "summary.json")); err == nil {
		t.Skip("the run ended before SIGKILL reached it")
	}
}
