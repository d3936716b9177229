package flow_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"herd/algo"
	"herd/algo/a2c"
	"herd/algo/dqn"
	"herd/algo/impala"
	"herd/algo/ppo"
	"herd/algo/sac"
	"herd/algo/td3"
	"herd/flow"
	"herd/metrics"
	"herd/sample"
	"herd/transport"
)

// resolve reads a run config for spec with the flow executor.
func resolve(t *testing.T, spec algo.Spec, file string) *algo.Resolved {
	t.Helper()
	res, err := algo.Resolve([]byte(file), []algo.Spec{spec}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// trainHash runs flow.Train and returns the sha256 of the final
// parameters and the episodes it logged.
func trainHash(t *testing.T, res *algo.Resolved) (string, *countLog) {
	t.Helper()
	log := &countLog{}
	m, err := flow.Train(context.Background(), &algo.Runtime{Header: res.Header, Log: log}, res.Spec, res.Config)
	if err != nil {
		t.Fatal(err)
	}
	return modelHash(t, m), log
}

// modelHash is the sha256 of m's saved parameters.
func modelHash(t *testing.T, m algo.Model) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// countLog records what a plan reported.
type countLog struct {
	episodes []string
	steps    int64
	scalars  map[string]float64 // the last value of each
}

func (l *countLog) Episode(step int64, ret float64, n int) {
	l.episodes = append(l.episodes, fmt.Sprintf("%d:%v:%d", step, ret, n))
}
func (l *countLog) Scalar(name string, v float64) {
	if l.scalars == nil {
		l.scalars = map[string]float64{}
	}
	l.scalars[name] = v
}
func (l *countLog) Step(s int64) { l.steps = s }

// TestSyncPlanSameBitsForAnyWorkers: a plan of synchronous operators only
// (GatherSync, ConcatBatches, TrainOneStep) trains the same parameters
// (PPO with an LSTM core too: each env's state joined with its segment),
// and logs the same episodes at the same steps, whether its envs are
// spread over 1, 2 or 4 workers, and whether the workers are goroutines
// (transport inproc) or serve their actors over NATS (an embedded server).
func TestSyncPlanSameBitsForAnyWorkers(t *testing.T) {
	for _, c := range []struct {
		spec algo.Spec
		cfg  string
	}{
		{a2c.Spec(), "a2c: {num_envs: 4, num_steps: 8}"},
		{ppo.Spec(), "ppo: {num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 2}"},
		{ppo.Spec(), "ppo: {num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 2, hidden: [8], recurrent: {type: lstm, hidden: 8}}"},
	} {
		name := c.spec.Name
		if strings.Contains(c.cfg, "recurrent") {
			name += "-lstm"
		}
		t.Run(name, func(t *testing.T) {
			var want string
			var wantLog *countLog
			for _, run := range []struct {
				transport string
				workers   int
			}{{"inproc", 1}, {"inproc", 2}, {"inproc", 4}, {"nats", 1}, {"nats", 2}} {
				file := fmt.Sprintf("algo: %s\nenv: CartPole-v1\nseed: 3\nsteps: 1300\nruntime: {executor: flow, env_workers: %d, transport: %s}\n%s\n",
					c.spec.Name, run.workers, run.transport, c.cfg)
				got, log := trainHash(t, resolve(t, c.spec, file))
				if d, ok := log.scalars["dist/duplicates"]; ok != (run.transport == "nats") || d != 0 {
					t.Errorf("over %s: dist/duplicates %v (logged %v); want 0, logged over nats only", run.transport, d, ok)
				}
				if want == "" {
					want, wantLog = got, log
					if len(log.episodes) == 0 || log.steps == 0 || log.steps > 1300 {
						t.Fatalf("1 worker: %d episodes, %d steps", len(log.episodes), log.steps)
					}
					continue
				}
				if got != want {
					t.Errorf("%d workers over %s: parameters %s, with 1 worker in-process %s", run.workers, run.transport, got, want)
				}
				if fmt.Sprint(log.episodes) != fmt.Sprint(wantLog.episodes) || log.steps != wantLog.steps {
					t.Errorf("%d workers over %s logged other episodes or steps than 1 worker in-process", run.workers, run.transport)
				}
			}
		})
	}
}

// TestSyncPlanAheadSameBits: PPO's plan with runtime.num_async 2 (the
// next round collected while the learner learns), feed-forward and with
// an LSTM core (each env's state joined with its segment), still trains
// the same bits for 1, 2 or 4 workers and either transport, reports
// every step of the budget in whole rounds (a worker a round ahead of
// another never cuts a round short), and differs from the barrier's bits
// (the rounds act on older weights). Plans without rounds to collect ahead refuse the
// setting.
func TestSyncPlanAheadSameBits(t *testing.T) {
	for _, c := range []struct{ name, cfg string }{
		{"ppo", "ppo: {num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 2}"},
		{"ppo-lstm", "ppo: {num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 2, hidden: [8], recurrent: {type: lstm, hidden: 8}}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := func(workers int, transport, extra string) string {
				return fmt.Sprintf("algo: ppo\nenv: CartPole-v1\nseed: 3\nsteps: 1300\nruntime: {executor: flow, env_workers: %d, transport: %s%s}\n%s\n", workers, transport, extra, c.cfg)
			}
			sync, _ := trainHash(t, resolve(t, ppo.Spec(), file(2, "inproc", "")))
			var want string
			for _, run := range []struct {
				transport string
				workers   int
				numAsync  int
			}{{"inproc", 1, 2}, {"inproc", 2, 2}, {"inproc", 4, 2}, {"nats", 2, 2}, {"inproc", 2, 3}} {
				got, log := trainHash(t, resolve(t, ppo.Spec(), file(run.workers, run.transport, fmt.Sprintf(", num_async: %d", run.numAsync))))
				if log.steps != 1280 {
					t.Errorf("%d workers over %s, num_async %d: %d steps, want the budget's whole rounds 1280", run.workers, run.transport, run.numAsync, log.steps)
				}
				switch {
				case run.numAsync == 3:
					if got == want || got == sync {
						t.Errorf("num_async 3 trained the bits of num_async 2 or of GatherSync")
					}
				case want == "":
					want = got
					if got == sync {
						t.Fatal("num_async 2 trained GatherSync's bits: the rounds were not collected ahead")
					}
				case got != want:
					t.Errorf("num_async 2, %d workers over %s: parameters %s, with 1 worker in-process %s", run.workers, run.transport, got, want)
				}
			}
		})
	}
	res := resolve(t, dqn.Spec(), "algo: dqn\nenv: CartPole-v1\nsteps: 1000\nruntime: {executor: flow, num_async: 2}\ndqn: {learning_starts: 500}\n")
	if _, err := flow.Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config); !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "num_async") {
		t.Errorf("the DQN plan with num_async 2: %v, want a config error naming num_async", err)
	}
	if _, err := algo.Resolve([]byte("algo: ppo\nenv: CartPole-v1\nruntime: {executor: dist, num_async: 2}\n"), []algo.Spec{ppo.Spec()}, algo.Overrides{}); !errors.Is(err, algo.ErrConfig) {
		t.Errorf("num_async under the dist executor: %v, want a config error", err)
	}
}

// TestTrainRunFlow: `herd train` with runtime.executor flow runs the plan
// and writes the run (summary steps = the budget in whole rounds).
func TestTrainRunFlow(t *testing.T) {
	res := resolve(t, a2c.Spec(), "algo: a2c\nenv: CartPole-v1\nseed: 1\nsteps: 1000\nruntime: {executor: flow, env_workers: 2}\na2c: {num_envs: 4, num_steps: 5}\n")
	res.Header.Out = t.TempDir() + "/run"
	sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: []algo.Executor{flow.Executor()}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps != 1000 || sum.Status != metrics.StatusCompleted {
		t.Errorf("summary: %d steps, status %q", sum.Steps, sum.Status)
	}
	for _, f := range []string{"metrics.csv", "summary.json", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(res.Header.Out, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestDQNPlans: the DQN plan (GatherSync, round-robin Union) trains the
// same bits, and logs the same episodes at the same steps, with its 4
// envs on 1, 2 or 4 workers, twice, and with the workers over NATS (n-step
// transitions, prioritized replay); the Ape-X plan (GatherAsync,
// UnionAsync) reports every env step of the budget, on either transport.
func TestDQNPlans(t *testing.T) {
	const slots = "algo: dqn\nenv: CartPole-v1\nseed: 2\nsteps: 3000\nruntime: {executor: flow, env_workers: %d, transport: %s}\n" +
		"dqn: {num_envs: 4, learning_starts: 500, buffer_size: 2000, batch_size: 32, target_network_frequency: 100, net_arch: [32, 32], n_steps: 3, prioritized: true}\n"
	var want string
	var wantLog *countLog
	for _, run := range []struct {
		workers   int
		transport string
	}{{1, "inproc"}, {2, "inproc"}, {4, "inproc"}, {2, "inproc"}, {1, "nats"}, {2, "nats"}} {
		got, log := trainHash(t, resolve(t, dqn.Spec(), fmt.Sprintf(slots, run.workers, run.transport)))
		if want == "" {
			want, wantLog = got, log
			if len(log.episodes) == 0 || log.steps != 3000 {
				t.Fatalf("1 worker: %d episodes, %d steps", len(log.episodes), log.steps)
			}
			continue
		}
		if got != want {
			t.Errorf("DQN plan, %d workers over %s: parameters %s, with 1 worker %s", run.workers, run.transport, got, want)
		}
		if fmt.Sprint(log.episodes) != fmt.Sprint(wantLog.episodes) || log.steps != wantLog.steps {
			t.Errorf("DQN plan, %d workers over %s: other episodes or steps than 1 worker", run.workers, run.transport)
		}
	}
	const base = "algo: dqn\nenv: CartPole-v1\nseed: 2\nsteps: 3000\nruntime: {executor: flow, env_workers: 2, transport: %s}\n" +
		"dqn: {learning_starts: 500, buffer_size: 2000, batch_size: 32, target_network_frequency: 100, net_arch: [32, 32]"
	for _, tr := range []string{"inproc", "nats"} {
		apex := resolve(t, dqn.Spec(), fmt.Sprintf(base, tr)+", prioritized: true, initial_priorities: actor, n_steps: 3}\n")
		_, log := trainHash(t, apex)
		if log.steps != 3000 || len(log.episodes) == 0 {
			t.Errorf("Ape-X plan over %s: %d steps, %d episodes", tr, log.steps, len(log.episodes))
		}
	}
}

// TestReplayPlanContinuous: SAC and TD3, which have no plan of their own,
// run PlanOf's ReplayPlan and learn (the actor loss is logged, so updates
// ran), with the same bits and episodes for 2 envs on 1 or 2 workers.
func TestReplayPlanContinuous(t *testing.T) {
	for _, c := range []struct {
		spec algo.Spec
		name string
	}{{sac.Spec(), "sac"}, {td3.Spec(), "td3"}} {
		file := "algo: " + c.name + "\nenv: Pendulum-v1\nseed: 3\nsteps: 600\nruntime: {executor: flow, env_workers: %d}\n" +
			c.name + ": {num_envs: 2, learning_starts: 200, buffer_size: 1000, batch_size: 16, net_arch: [16]}\n"
		want, wantLog := trainHash(t, resolve(t, c.spec, fmt.Sprintf(file, 1)))
		if _, learned := wantLog.scalars["losses/actor_loss"]; wantLog.steps != 600 || len(wantLog.episodes) != 2 || !learned {
			t.Fatalf("%s, 1 worker: %d steps, %d episodes, actor loss logged: %v", c.name, wantLog.steps, len(wantLog.episodes), learned)
		}
		got, log := trainHash(t, resolve(t, c.spec, fmt.Sprintf(file, 2)))
		if got != want || fmt.Sprint(log.episodes) != fmt.Sprint(wantLog.episodes) {
			t.Errorf("%s: 2 workers give parameters %s and episodes %v, 1 worker %s and %v", c.name, got, log.episodes, want, wantLog.episodes)
		}
	}
}

// TestCancelStopsEverything: cancelling a running plan (asynchronous:
// IMPALA's GatherAsync) returns the model with context.Canceled and leaves
// no goroutine behind, with the workers in-process or over NATS (the
// embedded server and its connections stop with the run).
func TestCancelStopsEverything(t *testing.T) {
	for _, tr := range []string{"inproc", "nats"} {
		t.Run(tr, func(t *testing.T) {
			before := runtime.NumGoroutine()
			res := resolve(t, impala.Spec(), "algo: impala\nenv: CartPole-v1\nsteps: 100000000\nruntime: {executor: flow, env_workers: 2, transport: "+tr+"}\nimpala: {num_envs: 4}\n")
			ctx, cancel := context.WithCancel(context.Background())
			log := &stopLog{at: 20000, cancel: cancel}
			m, err := flow.Train(ctx, &algo.Runtime{Header: res.Header, Log: log}, res.Spec, res.Config)
			if !errors.Is(err, context.Canceled) || m == nil {
				t.Fatalf("cancelled run: model %v, error %v", m, err)
			}
			for range 400 {
				if runtime.NumGoroutine() <= before {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Fatalf("%d goroutines after the run, %d before", runtime.NumGoroutine(), before)
		})
	}
}

// stopLog cancels the run once it has reported `at` steps.
type stopLog struct {
	at     int64
	cancel context.CancelFunc
}

func (l *stopLog) Episode(int64, float64, int) {}
func (l *stopLog) Scalar(string, float64)      {}
func (l *stopLog) Step(s int64) {
	if s >= l.at {
		l.cancel()
	}
}

// versionCheck is A2C's plan with a check between GatherSync and the
// learner: round r's segments, from every worker, must have been made with
// weights version r (the barrier: TrainOneStep's broadcast after round r−1
// reached every worker before its next segment).
type versionCheck struct {
	*a2c.Config
	t        *testing.T
	rounds   int
	numAsync int // GatherSyncAhead's rounds in flight: round r is made with version r − numAsync + 1
}

func (c *versionCheck) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	workers, err := flow.RolloutWorkers(r, c.NumEnvs, c.NumSteps, c.Gamma)
	if err != nil {
		return nil, err
	}
	learner, err := flow.SegmentLearner(r)
	if err != nil {
		return nil, err
	}
	r.SetBudget(int64(c.NumEnvs * c.NumSteps)) // whole rounds, also with a worker rounds ahead
	rounds := flow.ForEach(flow.GatherSyncAhead(flow.ParallelRollouts(workers), c.numAsync), func(segs []*sample.Segment) ([]*sample.Segment, error) {
		for k, s := range segs {
			if s.Version != uint64(max(0, c.rounds-c.numAsync+1)) || s.Worker != k {
				c.t.Errorf("round %d: worker %d's segment from worker %d has version %d", c.rounds, k, s.Worker, s.Version)
			}
		}
		c.rounds++
		return segs, nil
	})
	return flow.ForEach(flow.ConcatBatches(rounds), flow.TrainOneStep(workers, learner)), nil
}

// TestBarrierVersions runs the checked plan on 4 workers, in-process and
// over NATS, behind GatherSync's barrier and with the next round
// collected ahead (GatherSyncAhead 2: every round exactly one version
// behind, on every worker).
func TestBarrierVersions(t *testing.T) {
	for _, tr := range []string{"inproc", "nats", "inproc-ahead", "nats-ahead"} {
		t.Run(tr, func(t *testing.T) {
			transport, _, ahead := strings.Cut(tr, "-")
			res := resolve(t, a2c.Spec(), "algo: a2c\nenv: CartPole-v1\nsteps: 2000\nruntime: {executor: flow, env_workers: 4, transport: "+transport+"}\na2c: {num_envs: 4, num_steps: 5}\n")
			c := &versionCheck{Config: res.Config.(*a2c.Config), t: t, numAsync: 1}
			if ahead {
				c.numAsync = 2
			}
			if _, err := flow.TrainPlan(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config, c); err != nil {
				t.Fatal(err)
			}
			if c.rounds != 100 {
				t.Errorf("%d rounds, want 100", c.rounds)
			}
		})
	}
}

// TestWorkersServedElsewhere: the driver's workers are served by
// ServeWorker on connections of their own (as worker processes would be,
// over one NATS server); a synchronous plan gives the bits of the
// in-process run with the same workers, and the asynchronous Ape-X plan
// reports every step of its budget.
func TestWorkersServedElsewhere(t *testing.T) {
	srv, err := transport.StartServer(transport.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	calls := func(run string) transport.CallStream {
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		n, err := transport.NewNATS(nc)
		if err != nil {
			t.Fatal(err)
		}
		s, err := n.Calls(context.Background(), run, transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	for _, c := range []struct {
		name, file string
		sameBits   bool
		steps      int64 // reported: the budget (PPO: in whole rounds of 4 × 32)
	}{
		{"ppo", "algo: ppo\nenv: CartPole-v1\nseed: 3\nsteps: 1300\nruntime: {executor: flow, env_workers: 2}\nppo: {num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 2}\n", true, 1280},
		{"apex", "algo: dqn\nenv: CartPole-v1\nseed: 2\nsteps: 3000\nruntime: {executor: flow, env_workers: 2}\n" +
			"dqn: {learning_starts: 500, buffer_size: 2000, batch_size: 32, target_network_frequency: 100, net_arch: [32, 32], prioritized: true, initial_priorities: actor, n_steps: 3}\n", false, 3000},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := ppo.Spec()
			if c.name == "apex" {
				spec = dqn.Spec()
			}
			res := resolve(t, spec, c.file)
			want, _ := trainHash(t, res)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for k := range 2 {
				s := calls(c.name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := flow.ServeWorker(ctx, res.Header, res.Spec, res.Config, s, flow.ActorName(k)); err != nil {
						t.Errorf("worker %d: %v", k, err)
					}
				}()
			}
			log := &countLog{}
			m, err := flow.TrainServed(context.Background(), &algo.Runtime{Header: res.Header, Log: log}, res.Spec, res.Config, calls(c.name), nil)
			cancel()
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if c.sameBits {
				if got := modelHash(t, m); got != want {
					t.Errorf("served elsewhere: parameters %s, in-process %s", got, want)
				}
			}
			if log.steps != c.steps {
				t.Errorf("%d steps reported, want %d", log.steps, c.steps)
			}
		})
	}
}

// TestMultiAgentRolloutsRefused: rollout workers step single envs, so a
// multi-agent id (whose single env is the turn view) is refused, not
// trained on the wrong view.
func TestMultiAgentRolloutsRefused(t *testing.T) {
	res := resolve(t, a2c.Spec(), "algo: a2c\nenv: mpe/simple_spread_v3\nsteps: 1000\nruntime: {executor: flow}\na2c: {num_envs: 3}\n")
	_, err := flow.Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config)
	if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "multi-agent") {
		t.Fatalf("flow on simple_spread: %v, want ErrConfig naming multi-agent", err)
	}
}

// apexSyncs is the Ape-X plan (flow.ApeXPlan's operators) with a
// look at the workers' items: the weights version each was made with, per
// worker.
type apexSyncs struct {
	*dqn.Config
	workers  *flow.ReplayWorkers
	versions [][]uint64
}

func (p *apexSyncs) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	workers, err := flow.OffPolicyWorkers(r, p.NumEnvs, p.TrainFrequency/p.NumEnvs)
	if err != nil {
		return nil, err
	}
	workers.SyncEvery(p.ApeXSyncSteps)
	p.workers, p.versions = workers, make([][]uint64, workers.Len())
	learner, rb, err := flow.TransitionLearner(r)
	if err != nil {
		return nil, err
	}
	storeRB, err := flow.Fork(rb)
	if err != nil {
		return nil, err
	}
	ledger := &flow.Ledger{MaxLag: flow.ApeXLag}
	items := flow.ForEach(flow.GatherAsync(flow.OffPolicyRollouts(workers), 1), func(x flow.Experience) (flow.Experience, error) {
		k := x.Transitions.Worker
		p.versions[k] = append(p.versions[k], x.Transitions.Version)
		return x, nil
	})
	store := flow.StoreToReplay(r, storeRB, ledger, items)
	return flow.UnionAsync(store, flow.Replay(r, rb, learner, workers, ledger)), nil
}

// TestApeXSyncEvery: with apex_sync_steps 400 and items of 10 env steps,
// each Ape-X worker gets one weights message per 400 env steps of its own
// — before its items 40, 80, …, so (items − 1) / 40 in all — and not one
// per update; the version its items were made with changes there and
// nowhere else. Learning starts early enough (100 steps, the store at most
// 256 steps ahead of the learner) that the learner always has newer
// weights when a worker is due. With apex_sync_steps 0 every update
// reaches every worker.
func TestApeXSyncEvery(t *testing.T) {
	const file = "algo: dqn\nenv: CartPole-v1\nseed: 4\nsteps: 4000\nruntime: {executor: flow, env_workers: 2, transport: %s}\n" +
		"dqn: {learning_starts: 100, buffer_size: 2000, batch_size: 32, target_network_frequency: 100, net_arch: [32, 32], " +
		"prioritized: true, initial_priorities: actor, apex_sync_steps: %d}\n"
	for _, tr := range []string{"inproc", "nats"} {
		t.Run(tr, func(t *testing.T) {
			res := resolve(t, dqn.Spec(), fmt.Sprintf(file, tr, 400))
			p := &apexSyncs{Config: res.Config.(*dqn.Config)}
			if _, err := flow.TrainPlan(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config, p); err != nil {
				t.Fatal(err)
			}
			syncs, items := p.workers.Syncs(), 0
			for k, vs := range p.versions {
				items += len(vs)
				changes := 0
				for i := 1; i < len(vs); i++ {
					if vs[i] != vs[i-1] {
						changes++
						if i%40 != 0 {
							t.Errorf("worker %d: item %d made with version %d, item %d with %d: a copy between due points", k, i, vs[i], i-1, vs[i-1])
						}
					}
				}
				if want := int64(len(vs)-1) / 40; syncs[k] != want || int64(changes) != want {
					t.Errorf("worker %d, %d items: %d weights messages and %d version changes, want %d", k, len(vs), syncs[k], changes, want)
				}
			}
			if items != 400 {
				t.Errorf("%d items of 10 steps, want 400", items)
			}
		})
	}
	res := resolve(t, dqn.Spec(), fmt.Sprintf(file, "inproc", 0))
	p := &apexSyncs{Config: res.Config.(*dqn.Config)}
	if _, err := flow.TrainPlan(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config, p); err != nil {
		t.Fatal(err)
	}
	// Every Learn call sends to every worker; a call covers at most the
	// 266 steps the store may run ahead, so (4000 − 100) / 266 > 14 calls
	// (400: about 4 messages per worker).
	for k, n := range p.workers.Syncs() {
		if n < 15 {
			t.Errorf("apex_sync_steps 0: worker %d got %d weights messages, want one per Learn call", k, n)
		}
	}
}

// apexGreedy is the Ape-X plan without a learner (learning never starts,
// so every worker acts with the initial weights): it counts, per worker,
// the actions that differ from the greedy action of those weights.
type apexGreedy struct {
	*dqn.Config
	greedy       algo.PolicyNet
	off, actions []int
}

func (p *apexGreedy) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	workers, err := flow.OffPolicyWorkers(r, p.NumEnvs, p.TrainFrequency/p.NumEnvs)
	if err != nil {
		return nil, err
	}
	if p.greedy, err = r.Pieces.NewPolicy(); err != nil {
		return nil, err
	}
	p.off, p.actions = make([]int, workers.Len()), make([]int, workers.Len())
	var q []float32
	items := flow.ForEach(flow.GatherAsync(flow.OffPolicyRollouts(workers), 1), func(x flow.Experience) (flow.Report, error) {
		tr, w := x.Transitions, p.greedy.OutDim()
		q = p.greedy.ForwardTo(append(q[:0], make([]float32, tr.N*w)...), tr.Obs, tr.N)
		for i := range tr.N {
			best := 0
			for a := range w {
				if q[i*w+a] > q[i*w+best] {
					best = a
				}
			}
			if int(tr.Actions[i]) != best {
				p.off[tr.Worker]++
			}
			p.actions[tr.Worker]++
		}
		return x.Report, nil
	})
	return items, nil
}

// TestApeXActorEpsilon: with apex_epsilon each worker of a flow Ape-X plan
// is an Ape-X actor with its own fixed ε_k = 0.4^(1 + 7k/(N−1)) (Horgan
// et al. 2018, §4.1), in-process and with the workers served over NATS:
// a random action differs from the greedy one half the time with two
// actions, so worker k's share of non-greedy actions is ε_k/2 — 0.2,
// 0.008 and 0.0003 for three workers — where a shared schedule (start_e 1
// falling to end_e) gives every worker about the same share, near 0.14.
func TestApeXActorEpsilon(t *testing.T) {
	const file = "algo: dqn\nenv: CartPole-v1\nseed: 2\nsteps: 48000\nruntime: {executor: flow, env_workers: 3, transport: %s}\n" +
		"dqn: {learning_starts: 100000, buffer_size: 60000, net_arch: [16], apex_epsilon: 0.4, exploration_fraction: 0.5}\n"
	for _, tr := range []string{"inproc", "nats"} {
		t.Run(tr, func(t *testing.T) {
			res := resolve(t, dqn.Spec(), fmt.Sprintf(file, tr))
			p := &apexGreedy{Config: res.Config.(*dqn.Config)}
			if _, err := flow.TrainPlan(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config, p); err != nil {
				t.Fatal(err)
			}
			for k, n := range p.actions {
				want := algo.ApeXEpsilon(0.4, k, 3) / 2
				got := float64(p.off[k]) / float64(max(n, 1))
				// Workers claim items as they come, about 16000 actions
				// each; allow four binomial standard deviations.
				tol := 0.005 + 4*math.Sqrt(want*(1-want)/float64(max(n, 1)))
				if n < 500 || math.Abs(got-want) > tol {
					t.Errorf("worker %d: %d of %d actions not greedy (%.4f), want ≥ 500 actions and a share of ε_%d/2 = %.4f ± %.4f",
						k, p.off[k], n, got, k, want, tol)
				}
			}
		})
	}
}

// failingLearner is a learner whose first Learn call is slow and fails:
// it waits until the store sub-flow has stored more than the Ape-X
// plan's 256-step lag bound (so the store waits on the bound), then
// returns err.
type failingLearner struct {
	algo.TransitionLearner
	err error
}

func (f *failingLearner) Model() algo.Model {
	return f.TransitionLearner.(interface{ Model() algo.Model }).Model()
}

func (f *failingLearner) Learn(ctx context.Context, rb algo.Replay, _, _ int64) ([]algo.Stat, error) {
	for deadline := time.Now().Add(30 * time.Second); rb.Len() <= 256 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return nil, f.err
}

// failingApex is flow.ApeXPlan with the learner replaced.
type failingApex struct {
	*dqn.Config
	err error
}

func (p *failingApex) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	newLearner := r.Pieces.NewTransitionLearner
	r.Pieces.NewTransitionLearner = func() (algo.TransitionLearner, error) {
		l, err := newLearner()
		return &failingLearner{TransitionLearner: l, err: p.err}, err
	}
	return flow.ApeXPlan(r, p.NumEnvs, p.ApeXSyncSteps)
}

// blockedUnion is a plan whose one branch fails while the other waits for
// something only the run's context ends (a worker's item that does not
// come).
type blockedUnion struct {
	*dqn.Config
	err error
}

func (p *blockedUnion) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	waits := func(yield func(flow.Report, error) bool) {
		<-r.Ctx.Done()
		yield(flow.Report{}, r.Ctx.Err())
	}
	fails := func(yield func(flow.Report, error) bool) { yield(flow.Report{}, p.err) }
	return flow.UnionAsync[flow.Report](waits, fails), nil
}

// TestPlanFailureEndsRun: a failure in any branch of a plan ends the run
// promptly with that error — the Ape-X plan whose learner fails (slowly)
// while the store sub-flow waits on its lag bound, and a union whose
// other branch waits on the run's context — on either transport for the
// Ape-X plan. The deadline only proves there is no hang.
func TestPlanFailureEndsRun(t *testing.T) {
	const file = "algo: dqn\nenv: CartPole-v1\nseed: 2\nsteps: 20000\nruntime: {executor: flow, env_workers: 2, transport: %s}\n" +
		"dqn: {learning_starts: 100, buffer_size: 20000, batch_size: 32, net_arch: [16], prioritized: true, initial_priorities: actor}\n"
	for _, c := range []string{"apex-inproc", "apex-nats", "union"} {
		t.Run(c, func(t *testing.T) {
			kind, tr, _ := strings.Cut(c, "-")
			if tr == "" {
				tr = "inproc"
			}
			res := resolve(t, dqn.Spec(), fmt.Sprintf(file, tr))
			boom := errors.New("learner: NaN priority")
			var p flow.Planner = &failingApex{Config: res.Config.(*dqn.Config), err: boom}
			if kind == "union" {
				p = &blockedUnion{Config: res.Config.(*dqn.Config), err: boom}
			}
			done := make(chan error, 1)
			go func() {
				_, err := flow.TrainPlan(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config, p)
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, boom) {
					t.Fatalf("run ended with %v, want the failing branch's error", err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("the plan still runs two minutes after a branch failed")
			}
		})
	}
}

// stepSampler records the global steps its sampler was asked at.
type stepSampler struct {
	algo.Sampler
	mu    *sync.Mutex
	steps *[]int64
}

func (s stepSampler) SampleTo(dst *algo.Acts, out []float32, n int, step int64) {
	s.mu.Lock()
	*s.steps = append(*s.steps, step)
	s.mu.Unlock()
	s.Sampler.SampleTo(dst, out, n, step)
}

// recordSteps is flow.SyncPlan with every sampler recording its steps.
type recordSteps struct {
	mu    sync.Mutex
	steps []int64
}

func (p *recordSteps) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	newSampler := r.Pieces.NewSampler
	r.Pieces.NewSampler = func(n int, rnd *rand.Rand) (algo.Sampler, error) {
		s, err := newSampler(n, rnd)
		return stepSampler{Sampler: s, mu: &p.mu, steps: &p.steps}, err
	}
	return flow.SyncPlan(r, 4, 8, 0.99)
}

// TestRolloutWorkersGlobalStep: the samplers of rollout workers are asked
// at the global env step, as in the local loop (one vector step of all 4
// envs is 4 steps; round r starts at r·32), whatever the number of
// workers: the same steps, each once per env, for 1, 2 and 4 workers.
func TestRolloutWorkersGlobalStep(t *testing.T) {
	var want []int64
	for step := int64(0); step < 96; step += 4 {
		want = append(want, step, step, step, step)
	}
	for _, w := range []int{1, 2, 4} {
		res := resolve(t, a2c.Spec(), fmt.Sprintf("algo: a2c\nenv: CartPole-v1\nsteps: 96\nruntime: {executor: flow, env_workers: %d}\na2c: {num_envs: 4, num_steps: 8}\n", w))
		p := &recordSteps{}
		if _, err := flow.TrainPlan(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config, p); err != nil {
			t.Fatal(err)
		}
		slices.Sort(p.steps)
		if !slices.Equal(p.steps, want) {
			t.Errorf("%d workers: samplers asked at %v, want %v", w, p.steps, want)
		}
	}
}
