package reinforce_test

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/examples/reinforce"
	"herd/run"
	"herd/sample"
)

// resolve makes a REINFORCE run on CartPole under executor ex.
func resolve(t *testing.T, ex string, steps int64, set ...string) *algo.Resolved {
	t.Helper()
	algoName, envID := "reinforce", "CartPole-v1"
	ov := algo.Overrides{Algo: &algoName, Env: &envID, Steps: &steps,
		Set: append([]string{"runtime.executor=" + ex}, set...)}
	res, err := algo.Resolve(nil, []algo.Spec{reinforce.Spec()}, ov)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRunsWhereverItFits: the guide's algorithm trains under every
// executor whose needs its capabilities meet — local, hts, dist's
// on-policy topology and flow's SyncPlan — and is refused by the others with the reason the
// capability table gives, with no executor code naming it.
func TestRunsWhereverItFits(t *testing.T) {
	var trained []string
	for _, ex := range run.Executors() {
		res := resolve(t, ex.Name, 2*4*16, "num_steps=16")
		sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{NoFiles: true, Executors: run.Executors()})
		if r := algo.Refusal(ex, res.Header, res.Spec); r != "" {
			if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), r) {
				t.Errorf("%s: %v, want the refusal %q", ex.Name, err, r)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", ex.Name, err)
			continue
		}
		if sum.Steps != res.Header.Steps {
			t.Errorf("%s: %d steps, want %d", ex.Name, sum.Steps, res.Header.Steps)
		}
		trained = append(trained, ex.Name)
	}
	if want := []string{"local", "hts", "dist", "flow"}; !slices.Equal(trained, want) {
		t.Errorf("trained under %v, want %v", trained, want)
	}
}

// TestLearns: on CartPole the greedy policy balances far longer than a
// random one (about 22 steps) after 40k steps.
func TestLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 40k steps")
	}
	res := resolve(t, "local", 40_000)
	sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{NoFiles: true, EvalEpisodes: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d steps, %d episodes, greedy return %.1f, last-100 training return %.1f", sum.Steps, sum.Episodes, sum.EvalReturnMean, sum.FinalReturnMean100)
	if !(sum.EvalReturnMean > 150) || math.IsNaN(sum.EvalReturnMean) {
		t.Errorf("greedy return %.1f after %d steps, want > 150", sum.EvalReturnMean, sum.Steps)
	}
}

// TestLossIsTheEquation pins the learner to the package doc's equation on
// a hand-made segment of 3 steps × 2 envs in which env 0's episode ends at
// step 1: returns cut at the episode's end and the segment's, normalised,
// weighting log π of the behaviour actions under the initial weights.
func TestLossIsTheEquation(t *testing.T) {
	res := resolve(t, "local", 1000, "num_envs=2", "num_steps=3", "gamma=0.5")
	e, err := envMake(res.Header.Env)
	if err != nil {
		t.Fatal(err)
	}
	pieces, err := res.Spec.Pieces(res.Header, res.Config, e)
	if err != nil {
		t.Fatal(err)
	}
	const T, N, obsDim = 3, 2, 4
	seg := sample.NewSegment(T, N, obsDim, 1)
	for i := range seg.Obs {
		seg.Obs[i] = float32(i%7)/7 - 0.4
	}
	copy(seg.Actions, []float32{0, 1, 1, 1, 0, 0})
	copy(seg.Rewards, []float32{1, 2, 3, 4, 5, 6})
	seg.Dones[1*N+0] = 1 // env 0's episode ends at step 1
	// G, time-major (t·N + i), γ = 0.5: env 0: G_2 = 5, G_1 = 3 (ends), G_0 = 1 + 0.5·3;
	// env 1: G_2 = 6, G_1 = 4 + 3, G_0 = 2 + 0.5·7.
	g := []float64{2.5, 5.5, 3, 7, 5, 6}
	var mean, sq float64
	for _, x := range g {
		mean += x / 6
	}
	for _, x := range g {
		sq += (x - mean) * (x - mean) / 6
	}
	std := math.Sqrt(sq) + 1e-8
	pol, err := pieces.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	out := pol.ForwardTo(make([]float32, T*N*pol.OutDim()), seg.Obs, T*N)
	var want float64
	for k := range T * N {
		z := out[k*3 : k*3+2] // two logits, then the value column
		lse := math.Log(math.Exp(float64(z[0])) + math.Exp(float64(z[1])))
		logp := float64(z[int(seg.Actions[k])]) - lse
		want -= (g[k] - mean) / std * logp / (T * N)
	}
	l, err := pieces.NewSegmentLearner()
	if err != nil {
		t.Fatal(err)
	}
	stats, err := l.Learn(context.Background(), seg)
	if err != nil {
		t.Fatal(err)
	}
	if got := stats[0].Value; stats[0].Name != "losses/policy_loss" || math.Abs(got-want) > 1e-5 {
		t.Errorf("%s = %.7f, want %.7f", stats[0].Name, got, want)
	}
	if got := stats[1].Value; math.Abs(got-std) > 1e-5 {
		t.Errorf("return std %.7f, want %.7f", got, std)
	}
	if v := l.Weights(); v.N != 1 {
		t.Errorf("version %d after one Learn, want 1", v.N)
	}
}

func envMake(id string) (algo.Spaces, error) {
	e, err := env.Make(id)
	if err != nil {
		return algo.Spaces{}, err
	}
	defer e.Close()
	return algo.SpacesOf(e), nil
}

// TestGuideQuotesTheCode: every Go block of docs/guide/new-algorithm.md is
// quoted verbatim from reinforce.go, so the guide's code is the code these
// tests train.
func TestGuideQuotesTheCode(t *testing.T) {
	guide, err := os.ReadFile("../../docs/guide/new-algorithm.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("reinforce.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(guide), "```go\n")[1:]
	if len(blocks) < 5 {
		t.Fatalf("the guide has %d Go blocks", len(blocks))
	}
	for _, b := range blocks {
		code, _, ok := strings.Cut(b, "```")
		if !ok || !strings.Contains(string(src), code) {
			t.Errorf("a block of the guide is not in reinforce.go:\n%s", code)
		}
	}
}

// TestSeveralPolicies: REINFORCE declares multi-agent rows, and the local
// executor trains two REINFORCE policies on simple_spread's agents, each on
// its own agents' rows, with no executor code naming it.
func TestSeveralPolicies(t *testing.T) {
	file := `algo: reinforce
env: mpe/simple_spread_v3?agent_id=true&max_cycles=10
steps: 1200
multiagent:
  policies: [first, rest]
  policy_mapping: {agent_0: first, "agent_*": rest}
reinforce: {num_envs: 6, num_steps: 10}
`
	res, err := algo.Resolve([]byte(file), []algo.Spec{reinforce.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{NoFiles: true, Executors: run.Executors()})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps != res.Header.Steps || sum.Episodes == 0 {
		t.Errorf("%d steps (want %d), %d episodes", sum.Steps, res.Header.Steps, sum.Episodes)
	}
}
