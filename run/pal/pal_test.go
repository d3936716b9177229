package pal

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/ddpg"
	"herd/algo/dqn"
	"herd/algo/ppo"
	"herd/algo/sac"
	"herd/algo/td3"
	"herd/run/hts"
)

func resolve(t *testing.T, spec algo.Spec, file string) *algo.Resolved {
	t.Helper()
	res, err := algo.Resolve([]byte(file), []algo.Spec{spec}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

const dqnFile = `algo: dqn
env: CartPole-v1
seed: 2
steps: 2000
runtime: {executor: pal, actors: 2}
dqn: {num_envs: 1, buffer_size: 1000, batch_size: 32, learning_starts: 500, train_frequency: 10, target_network_frequency: 100, net_arch: [16]}
`

func train(t *testing.T, ctx context.Context, res *algo.Resolved, opt Options) (algo.Model, Stats, error) {
	t.Helper()
	var st Stats
	opt.Stats = &st
	m, err := Train(ctx, &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config, opt)
	return m, st, err
}

// TestReplayRatio: every env step is taken once and the learner makes
// exactly the updates the algorithm's schedule asks for, whatever the
// number of actors and the lag.
func TestReplayRatio(t *testing.T) {
	cases := []struct {
		spec        algo.Spec
		file        string
		wantUpdates uint64
	}{
		// DQN: one update per multiple of train_frequency in (500, 2000].
		{dqn.Spec(), dqnFile, 150},
		// Prioritized n-step DQN: priorities fed back while actors add.
		{dqn.Spec(), strings.Replace(dqnFile, "net_arch: [16]}", "net_arch: [16], prioritized: true, n_steps: 3, gradient_steps: 2}", 1), 300},
		// TD3, SAC, DDPG: one update per env step after learning_starts.
		{td3.Spec(), "algo: td3\nenv: Pendulum-v1\nseed: 1\nsteps: 600\ntd3: {num_envs: 2, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n", 400},
		{sac.Spec(), "algo: sac\nenv: Pendulum-v1\nseed: 1\nsteps: 600\nsac: {num_envs: 1, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n", 400},
		{ddpg.Spec(), "algo: ddpg\nenv: Pendulum-v1\nseed: 1\nsteps: 600\nddpg: {num_envs: 1, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n", 400},
	}
	for _, c := range cases {
		for _, opt := range []Options{{Actors: 1}, {Actors: 3, MaxLag: 8}, {Actors: 8, RefreshEvery: 5, PublishEvery: 3}} {
			res := resolve(t, c.spec, c.file)
			m, st, err := train(t, context.Background(), res, opt)
			if err != nil {
				t.Fatalf("%s %+v: %v", c.spec.Name, opt, err)
			}
			if m == nil || st.EnvSteps != res.Header.Steps || st.Updates != c.wantUpdates {
				t.Errorf("%s %+v: model %v, %d env steps, %d updates; want %d, %d", c.spec.Name, opt, m != nil,
					st.EnvSteps, st.Updates, res.Header.Steps, c.wantUpdates)
			}
			if st.Versions == 0 {
				t.Errorf("%s %+v: no weights published", c.spec.Name, opt)
			}
		}
	}
}

// TestCancel: cancelling mid-run stops every actor and the learner, parked
// or not, returns ctx's error with a model, and leaves no goroutine behind.
func TestCancel(t *testing.T) {
	res := resolve(t, td3.Spec(), "algo: td3\nenv: Pendulum-v1\nseed: 1\nsteps: 1000000\ntd3: {num_envs: 1, batch_size: 16, learning_starts: 100, net_arch: [8, 8]}\n")
	res.Header.Steps = 1 << 40 // actors without a learner take ~10⁶ steps/s
	before := runtime.NumGoroutine()
	for _, opt := range []Options{{Actors: 8, MaxLag: 4}, {Actors: 8, NoLearn: true},
		{Actors: 4, Learners: 4, MaxLag: 4}, {Actors: 4, Learners: 4, LearnerMode: ModeSync}} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		m, st, err := train(t, ctx, res, opt)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || m == nil {
			t.Fatalf("%+v: err %v, model %v", opt, err, m != nil)
		}
		if st.EnvSteps == 0 || st.EnvSteps >= res.Header.Steps {
			t.Errorf("%+v: %d env steps before the cancellation", opt, st.EnvSteps)
		}
	}
	// Goroutines may take a moment to be reaped after they return.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after cancellation, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestNoLearn: actors alone take every step and the learner makes none.
func TestNoLearn(t *testing.T) {
	res := resolve(t, dqn.Spec(), dqnFile)
	_, st, err := train(t, context.Background(), res, Options{Actors: 4, NoLearn: true})
	if err != nil || st.EnvSteps != 2000 || st.Updates != 0 || st.ActorWait != 0 {
		t.Fatalf("err %v, stats %+v", err, st)
	}
}

// TestConfigErrors: settings PAL cannot honour are refused with a clear
// error, before any work.
func TestConfigErrors(t *testing.T) {
	res := resolve(t, dqn.Spec(), dqnFile)
	for _, c := range []struct {
		opt  Options
		want string
	}{
		{Options{Learners: -2}, "learners -2"},
		{Options{Learners: 2, LearnerMode: "hogwild"}, `learner_mode "hogwild"`},
		{Options{UpdateInterval: 4}, "update_interval 4 differs from dqn's 10"},
		{Options{Actors: -1}, "actors -1"},
		{Options{MaxLag: -3}, "max_lag -3"},
		{Options{Learners: 3, LearnerMode: ModeSync}, "batch_size 32 is not a multiple of learners 3"},
		{Options{Learners: 2, LearnerMode: ModeSync, SyncBatch: "half"}, `sync_batch "half"`},
	} {
		_, _, err := train(t, context.Background(), res, c.opt)
		if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a config error with %q", c.opt, err, c.want)
		}
	}
	pres := resolve(t, ppo.Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 512\nppo: {num_envs: 1, num_steps: 128}\n")
	if _, _, err := train(t, context.Background(), pres, Options{}); !errors.Is(err, algo.ErrConfig) {
		t.Errorf("ppo under pal: %v, want a config error", err)
	}
	// The runtime: section's values are checked when the config is read,
	// its keys and the executor's rules when the run is admitted.
	for _, bad := range []string{
		"runtime: {executor: pal, learners: 3, learner_mode: lockstep}",
		"runtime: {executor: hts, learner_mode: sync}",
		"runtime: {executor: pal, learners: 1000}",
		"runtime: {executor: hts, actors: 2}",
		"runtime: {executor: pal, update_interval: -1}",
		"runtime: {executor: pal, learners: 2, sync_batch: full}",
		"runtime: {executor: pal, learners: 2, learner_mode: sync, sync_batch: most}",
		"runtime: {executor: pal, replay_locking: none}",
	} {
		file := strings.Replace(dqnFile, "runtime: {executor: pal, actors: 2}", bad, 1)
		res, err := algo.Resolve([]byte(file), []algo.Spec{dqn.Spec()}, algo.Overrides{})
		if err == nil {
			_, err = algo.AdmitRun([]algo.Executor{Executor(), hts.Executor()}, res)
		}
		if !errors.Is(err, algo.ErrConfig) {
			t.Errorf("%s: %v, want a config error", bad, err)
		}
	}
}

// TestMeasure: the profiling runs of herd tune report positive rates for
// one and two workers.
func TestMeasure(t *testing.T) {
	res := resolve(t, dqn.Spec(), strings.Replace(dqnFile, "net_arch: [16]}", "net_arch: [16], prioritized: true}", 1))
	for _, x := range []int{1, 4} {
		fa, err := MeasureActors(context.Background(), res.Header, res.Spec, res.Config, x, 100*time.Millisecond)
		if err != nil || !(fa > 0) {
			t.Errorf("f_a(%d) = %v, %v", x, fa, err)
		}
		fl, err := MeasureLearners(context.Background(), res.Header, res.Spec, res.Config, x, 100*time.Millisecond)
		if err != nil || !(fl > 0) {
			t.Errorf("f_l(%d) = %v, %v", x, fl, err)
		}
	}
}

// TestLearners: M = 2, 3 learners in both modes take every env step once
// and make exactly the updates of the algorithm's schedule — one
// minibatch gradient each, so the samples drawn per inserted transition
// (Updates·batch_size / EnvSteps) are the single-process ones — for DQN
// (uniform and prioritized n-step) and the actor-critics; with M > 1 in
// either mode every update is one apply (a sync round is one update).
func TestLearners(t *testing.T) {
	cases := []struct {
		spec        algo.Spec
		file        string
		wantUpdates uint64
	}{
		{dqn.Spec(), dqnFile, 150},
		{dqn.Spec(), strings.Replace(dqnFile, "net_arch: [16]}", "net_arch: [16], prioritized: true, n_steps: 3, gradient_steps: 2}", 1), 300},
		{td3.Spec(), "algo: td3\nenv: Pendulum-v1\nseed: 1\nsteps: 600\ntd3: {num_envs: 2, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n", 400},
		{sac.Spec(), "algo: sac\nenv: Pendulum-v1\nseed: 1\nsteps: 500\nsac: {num_envs: 1, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n", 300},
		{ddpg.Spec(), "algo: ddpg\nenv: Pendulum-v1\nseed: 1\nsteps: 500\nddpg: {num_envs: 1, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n", 300},
	}
	for _, c := range cases {
		for _, opt := range []Options{{Actors: 2, Learners: 2}, {Actors: 2, Learners: 3, MaxLag: 4},
			{Actors: 2, Learners: 2, LearnerMode: ModeSync}, {Actors: 3, Learners: 3, LearnerMode: ModeSync, SyncBatch: SyncFull, MaxLag: 4, PublishEvery: 2}} {
			if c.spec.Name != "dqn" && c.spec.Name != "td3" && opt.Learners == 3 {
				continue // SAC and DDPG: M = 2 suffices to exercise their split
			}
			res := resolve(t, c.spec, c.file)
			m, st, err := train(t, context.Background(), res, opt)
			if err != nil {
				t.Fatalf("%s %+v: %v", c.spec.Name, opt, err)
			}
			if m == nil || st.EnvSteps != res.Header.Steps || st.Updates != c.wantUpdates {
				t.Errorf("%s %+v: model %v, %d env steps, %d updates; want %d, %d", c.spec.Name, opt, m != nil,
					st.EnvSteps, st.Updates, res.Header.Steps, c.wantUpdates)
			}
			if st.Versions == 0 {
				t.Errorf("%s %+v: no weights published", c.spec.Name, opt)
			}
			if st.Applies != c.wantUpdates {
				t.Errorf("%s %+v: %d applies, want %d", c.spec.Name, opt, st.Applies, c.wantUpdates)
			}
			if bound := uint64(opt.Learners - 1); st.MaxStale > bound || (opt.LearnerMode == ModeSync && st.MaxStale != 0) {
				t.Errorf("%s %+v: gradients up to %d updates stale, bound %d", c.spec.Name, opt, st.MaxStale, bound)
			}
		}
	}
}

// TestRace: 8 actors and 4 learners on one prioritized replay, in both
// modes — meant for go test -race (the weight versions the learners and
// actors read are immutable, so a torn read would show as a race; see
// also weights.TestStoreNeverTorn).
func TestRace(t *testing.T) {
	file := strings.Replace(dqnFile, "net_arch: [16]}", "net_arch: [16], prioritized: true, n_steps: 3}", 1)
	file = strings.Replace(file, "num_envs: 1", "num_envs: 2", 1)
	for _, mode := range []string{ModeAsync, ModeSync} {
		res := resolve(t, dqn.Spec(), file)
		_, st, err := train(t, context.Background(), res, Options{Actors: 8, Learners: 4, LearnerMode: mode, MaxLag: 16})
		if err != nil || st.EnvSteps != 2000 || st.Updates != 150 {
			t.Errorf("%s: err %v, %d env steps, %d updates; want 2000, 150", mode, err, st.EnvSteps, st.Updates)
		}
	}
	res := resolve(t, td3.Spec(), "algo: td3\nenv: Pendulum-v1\nseed: 1\nsteps: 400\ntd3: {num_envs: 1, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n")
	_, st, err := train(t, context.Background(), res, Options{Actors: 8, Learners: 4, MaxLag: 8})
	if err != nil || st.EnvSteps != 400 || st.Updates != 200 {
		t.Errorf("td3: err %v, %d env steps, %d updates; want 400, 200", err, st.EnvSteps, st.Updates)
	}
}

// TestSetRuntime: --set runtime.key=value reaches the runtime: section
// (and is validated there); other pairs still go to the algorithm.
func TestSetRuntime(t *testing.T) {
	res, err := algo.Resolve([]byte(dqnFile), []algo.Spec{dqn.Spec()}, algo.Overrides{Set: []string{
		"runtime.learners=3", "runtime.learner_mode=sync", "batch_size=16"}})
	if err != nil {
		t.Fatal(err)
	}
	if rc := res.Header.Runtime; rc.Learners != 3 || rc.LearnerMode != ModeSync || rc.Actors != 2 {
		t.Errorf("runtime %+v, want learners 3, sync, actors 2 kept", rc)
	}
	if o := OptionsOf(res.Header); o.Learners != 3 || o.LearnerMode != ModeSync {
		t.Errorf("options %+v", o)
	}
	for _, bad := range []string{"runtime.bogus=1", "runtime.learner_mode=both", "runtime.learners=-1"} {
		if _, err := algo.Resolve([]byte(dqnFile), []algo.Spec{dqn.Spec()}, algo.Overrides{Set: []string{bad}}); !errors.Is(err, algo.ErrConfig) {
			t.Errorf("%s: %v, want a config error", bad, err)
		}
	}
}

// episodes is a Logger keeping the returns of finished episodes.
type episodes struct {
	algo.Logger
	mu      sync.Mutex
	returns []float64
}

func (e *episodes) Episode(_ int64, ret float64, _ int) {
	e.mu.Lock()
	e.returns = append(e.returns, ret)
	e.mu.Unlock()
}

// TestApeXPrioritiesLearn: with initial_priorities: actor, two actors
// compute the priorities of what they store with their own copies, and
// the run still learns CartPole on a small budget (random ≈ 22).
func TestApeXPrioritiesLearn(t *testing.T) {
	res := resolve(t, dqn.Spec(), `algo: dqn
env: CartPole-v1
seed: 1
steps: 8000
runtime: {executor: pal, actors: 2}
dqn: {num_envs: 1, learning_rate: 1.0e-3, batch_size: 64, learning_starts: 500, train_frequency: 1, target_network_frequency: 100,
  exploration_fraction: 0.3, net_arch: [64, 64], prioritized: true, n_steps: 3, initial_priorities: actor}
`)
	log := &episodes{Logger: algo.Discard()}
	var st Stats
	_, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: log}, res.Spec, res.Config, Options{Actors: 2, Stats: &st})
	if err != nil {
		t.Fatal(err)
	}
	n := min(20, len(log.returns))
	var sum float64
	for _, r := range log.returns[len(log.returns)-n:] {
		sum += r
	}
	mean := sum / float64(n)
	t.Logf("mean return of the last %d episodes: %.1f (%d updates)", n, mean, st.Updates)
	if !(mean > 60) {
		t.Errorf("mean return of the last %d episodes = %.1f after 8k steps, want > 60", n, mean)
	}
}

// TestTrainRunNoRace runs PAL with two learners in both modes through
// algo.TrainRun with a metrics row every 16 env steps, so the divergence
// guard inspects the parameters of the learner the service applies to all
// along (meant for go test -race).
func TestTrainRunNoRace(t *testing.T) {
	exec := []algo.Executor{Executor()}
	for _, mode := range []string{ModeAsync, ModeSync} {
		file := strings.Replace(dqnFile, "runtime: {executor: pal, actors: 2}", "log_every: 16\nruntime: {executor: pal, actors: 2, learners: 2, learner_mode: "+mode+"}", 1)
		res := resolve(t, dqn.Spec(), file)
		res.Header.Out = t.TempDir()
		sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: exec, Dir: algo.DirForce})
		if err != nil || sum.Steps != 2000 {
			t.Errorf("%s: steps %d, error %v; want 2000, nil", mode, sum.Steps, err)
		}
	}
}

// TestSameCountsAsLocal: with M = 1, 2, 4 learners in both modes the
// learner takes exactly the critic steps, actor steps and target updates
// of the single-process algorithm for the same env steps (M = 1 runs the
// algorithm's own Learn, the local executor's update, whose counts depend
// only on the env steps): data-parallel sync rounds are one update each,
// so TD3's policy delay and every target schedule are unchanged.
func TestSameCountsAsLocal(t *testing.T) {
	cases := []struct {
		spec algo.Spec
		file string
		want algo.UpdateCounts // the algorithm's schedule, worked out by hand
	}{
		// 150 updates in (500, 2000], a target copy per multiple of 100.
		{dqn.Spec(), dqnFile, algo.UpdateCounts{Critic: 150, Target: 15}},
		// 400 critic updates, every 2nd with an actor step and a Polyak update.
		{td3.Spec(), "algo: td3\nenv: Pendulum-v1\nseed: 1\nsteps: 600\ntd3: {num_envs: 2, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n",
			algo.UpdateCounts{Critic: 400, Actor: 200, Target: 200}},
		// 300 critic updates; every 2nd env step 2 actor steps; a Polyak update per step.
		{sac.Spec(), "algo: sac\nenv: Pendulum-v1\nseed: 1\nsteps: 500\nsac: {num_envs: 1, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n",
			algo.UpdateCounts{Critic: 300, Actor: 300, Target: 300}},
		// 300 critic updates, every 2nd with an actor step and a Polyak update.
		{ddpg.Spec(), "algo: ddpg\nenv: Pendulum-v1\nseed: 1\nsteps: 500\nddpg: {num_envs: 1, batch_size: 16, learning_starts: 200, net_arch: [8, 8]}\n",
			algo.UpdateCounts{Critic: 300, Actor: 150, Target: 150}},
	}
	for _, c := range cases {
		res := resolve(t, c.spec, c.file)
		_, st, err := train(t, context.Background(), res, Options{Actors: 2})
		if err != nil {
			t.Fatal(err)
		}
		local := st.Counts
		if local != c.want {
			t.Errorf("%s, one learner: %+v, the schedule gives %+v", c.spec.Name, local, c.want)
		}
		for _, M := range []int{1, 2, 4} {
			for _, mode := range []string{ModeAsync, ModeSync} {
				_, st, err := train(t, context.Background(), resolve(t, c.spec, c.file), Options{Actors: 2, Learners: M, LearnerMode: mode})
				if err != nil {
					t.Fatalf("%s M %d %s: %v", c.spec.Name, M, mode, err)
				}
				if st.Counts != local {
					t.Errorf("%s M %d %s: %+v, local %+v", c.spec.Name, M, mode, st.Counts, local)
				}
			}
		}
	}
}

// BenchmarkLocking compares the replay's two lockings inside PAL (DQN
// CartPole, the 120-84 network and batch 128 of configs/dqn-cartpole-pal.yaml,
// 20k steps, learning from step 1000), uniform and prioritized, for N
// actors and M learners with N + M = 2, 3, 4. Run with -benchtime 1x and
// -count n: each count runs every case once, so the cases interleave.
func BenchmarkLocking(b *testing.B) {
	const file = `algo: dqn
env: CartPole-v1
seed: 1
steps: 20000
runtime: {executor: pal}
dqn: {num_envs: 1, buffer_size: 10000, batch_size: 128, learning_starts: 1000, train_frequency: 10, target_network_frequency: 500, net_arch: [120, 84], prioritized: PRIO}
`
	for _, prio := range []string{"false", "true"} {
		for _, nm := range [][2]int{{1, 1}, {2, 1}, {1, 2}, {3, 1}, {2, 2}} {
			for _, lock := range []string{"global", "two-lock"} {
				name := fmt.Sprintf("prio=%s/N=%d/M=%d/%s", prio, nm[0], nm[1], lock)
				b.Run(name, func(b *testing.B) {
					res, err := algo.Resolve([]byte(strings.Replace(file, "PRIO", prio, 1)), []algo.Spec{dqn.Spec()}, algo.Overrides{})
					if err != nil {
						b.Fatal(err)
					}
					res.Header.Runtime.ReplayLocking = lock
					var steps int64
					for b.Loop() {
						var st Stats
						if _, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config,
							Options{Actors: nm[0], Learners: nm[1], LearnerMode: ModeSync, Stats: &st}); err != nil {
							b.Fatal(err)
						}
						steps += st.EnvSteps
					}
					b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
				})
			}
		}
	}
}

// TestDQNTargetSyncsAsLocal: DQN's target syncs are keyed to env steps,
// so with 1..4 learners in both modes their number is one learner's for
// target_network_frequency a multiple of train_frequency or not, also when
// the last sync falls after the last update (steps 1010: the sync at 1000
// with train_frequency 3 has no update at 1000).
func TestDQNTargetSyncsAsLocal(t *testing.T) {
	cases := []struct {
		train, target, steps int
		want                 uint64
	}{
		{10, 100, 1000, 5},
		{3, 10, 1000, 50},
		{4, 10, 1010, 51},
		{7, 5, 800, 60},
		{6, 1, 700, 200},
	}
	for _, c := range cases {
		file := fmt.Sprintf("algo: dqn\nenv: CartPole-v1\nseed: 2\nsteps: %d\nruntime: {executor: pal, actors: 2}\n"+
			"dqn: {num_envs: 1, buffer_size: 1000, batch_size: 24, learning_starts: 500, train_frequency: %d, target_network_frequency: %d, net_arch: [8]}\n",
			c.steps, c.train, c.target)
		_, st, err := train(t, context.Background(), resolve(t, dqn.Spec(), file), Options{Actors: 2})
		if err != nil {
			t.Fatal(err)
		}
		local := st.Counts
		if local.Target != c.want {
			t.Errorf("%+v, one learner: %d target syncs, want %d", c, local.Target, c.want)
		}
		for M := 1; M <= 4; M++ {
			for _, mode := range []string{ModeAsync, ModeSync} {
				_, st, err := train(t, context.Background(), resolve(t, dqn.Spec(), file), Options{Actors: 2, Learners: M, LearnerMode: mode})
				if err != nil {
					t.Fatalf("%+v M %d %s: %v", c, M, mode, err)
				}
				if st.Counts != local {
					t.Errorf("%+v M %d %s: %+v, local %+v", c, M, mode, st.Counts, local)
				}
			}
		}
	}
}
