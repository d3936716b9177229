package onpolicy

import (
	"context"
	"errors"
	"slices"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
	"herd/rollout"
	"herd/sample"
	"herd/weights"
)

// testSpaces are a Discrete and a Box action space, each with its own
// observation width.
var testSpaces = map[string]algo.Spaces{
	"discrete": {Obs: env.UniformBox(-1, 1, 4), Act: env.Discrete{N: 3, Start: -1}},
	"box":      {Obs: env.UniformBox(-1, 1, 3), Act: env.UniformBox(-0.5, 0.5, 2)},
}

var testAgentConfig = AgentConfig{Hidden: []int{64, 64}, Act: nn.Tanh, OrthoInit: true, InitLogStd: -0.3}

func newTestPolicy(t testing.TB, sp algo.Spaces, seed uint64) *Policy {
	t.Helper()
	p, err := NewPolicy(sp, testAgentConfig, rng.New(seed, "test/init", 0))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func randObs(seed uint64, n, dim int) []float32 {
	r := rng.New(seed, "test/obs", 0)
	obs := make([]float32, n*dim)
	for i := range obs {
		obs[i] = float32(2 * r.NormFloat64())
	}
	return obs
}

// forwardInBatches runs p on the rows of obs in batches of size b (the last
// one shorter) and returns the concatenated outputs.
func forwardInBatches(p *Policy, obs []float32, n, dim, b int) []float32 {
	var out []float32
	for s := 0; s < n; s += b {
		m := min(b, n-s)
		out = append(out, p.ForwardTo(make([]float32, m*p.OutDim()), obs[s*dim:(s+m)*dim], m)...)
	}
	return out
}

// TestPolicyRowsIndependentOfBatch: the same 64 observations served in
// batches of 1, 7 and 64 give bit-identical rows, so a policy worker may
// batch requests from any env workers.
func TestPolicyRowsIndependentOfBatch(t *testing.T) {
	for name, sp := range testSpaces {
		p := newTestPolicy(t, sp, 1)
		dim := sp.Obs.(env.Box).Dim()
		const n = 64
		obs := randObs(2, n, dim)
		want := forwardInBatches(p, obs, n, dim, n)
		for _, b := range []int{1, 7} {
			if got := forwardInBatches(p, obs, n, dim, b); !slices.Equal(got, want) {
				t.Fatalf("%s: batches of %d give other outputs than one batch of %d", name, b, n)
			}
		}
		// The row layout: actor part, then V(s) (the critic alone).
		v := p.agent.Value(make([]float32, n), obs, n)
		w := p.OutDim()
		for r := range n {
			if want[(r+1)*w-1] != v[r] {
				t.Fatalf("%s: row %d ends with %v, V(s) = %v", name, r, want[(r+1)*w-1], v[r])
			}
		}
		if p.agent.Gauss != nil && (want[2] != -0.3 || want[3] != -0.3) {
			t.Fatalf("%s: row 0 = %v, want the log-std -0.3 after the mean", name, want[:w])
		}
	}
}

// TestSamplersAgreeWhateverTheBatch: two samplers on the same env-worker
// stream draw the same actions, log-probabilities and values from the same
// rows, whether the rows arrive in one batch of 64 or in batches of 1 and 7
// computed separately.
func TestSamplersAgreeWhateverTheBatch(t *testing.T) {
	for name, sp := range testSpaces {
		p := newTestPolicy(t, sp, 1)
		dim := sp.Obs.(env.Box).Dim()
		const n = 64
		obs := randObs(3, n, dim)
		newSampler := func() *Sampler {
			s, err := NewSampler(sp, rng.New(5, "env-worker", 3))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		var whole algo.Acts
		newSampler().SampleTo(&whole, forwardInBatches(p, obs, n, dim, n), n, 0)

		var parts algo.Acts
		s := newSampler()
		for start, i := 0, 0; start < n; i++ {
			m := min([]int{1, 7}[i%2], n-start)
			out := p.ForwardTo(make([]float32, m*p.OutDim()), obs[start*dim:(start+m)*dim], m)
			var a algo.Acts
			s.SampleTo(&a, out, m, int64(start))
			parts.Actions = append(parts.Actions, a.Actions...)
			parts.EnvActions = append(parts.EnvActions, a.EnvActions...)
			parts.LogProbs = append(parts.LogProbs, a.LogProbs...)
			parts.Values = append(parts.Values, a.Values...)
			start += m
		}
		for what, pair := range map[string][2][]float32{"actions": {whole.Actions, parts.Actions},
			"env actions": {whole.EnvActions, parts.EnvActions}, "log-probs": {whole.LogProbs, parts.LogProbs},
			"values": {whole.Values, parts.Values}} {
			if !slices.Equal(pair[0], pair[1]) {
				t.Fatalf("%s: %s differ between one batch and batches of 1 and 7", name, what)
			}
		}
		// Another env worker's stream draws other actions.
		var other algo.Acts
		o, _ := NewSampler(sp, rng.New(5, "env-worker", 4))
		o.SampleTo(&other, forwardInBatches(p, obs, n, dim, n), n, 0)
		if slices.Equal(other.Actions, whole.Actions) {
			t.Fatalf("%s: env workers 3 and 4 drew the same actions", name)
		}
		// Env actions are the stored ones shifted (Discrete) or clipped (Box).
		for k, a := range whole.Actions {
			e := whole.EnvActions[k]
			if name == "discrete" && (e != a-1 || a != float32(int(a)) || a < 0 || a > 2) {
				t.Fatalf("discrete action %v sent as %v", a, e)
			}
			if name == "box" && e != min(max(a, -0.5), 0.5) {
				t.Fatalf("box action %v sent as %v", a, e)
			}
		}
	}
}

// TestWeightsRoundTrip: a version encoded to bytes and decoded through the
// pieces makes a policy built from another seed compute bit-identical
// outputs to the policy the version was taken from.
func TestWeightsRoundTrip(t *testing.T) {
	for name, sp := range testSpaces {
		src := newTestPolicy(t, sp, 7)
		dim := sp.Obs.(env.Box).Dim()
		const n = 9
		obs := randObs(4, n, dim)
		want := forwardInBatches(src, obs, n, dim, n)

		b, err := weights.New(12, src.Params()).Encode()
		if err != nil {
			t.Fatal(err)
		}
		pc, err := NewPieces("test", algo.Header{Seed: 1}, sp, testAgentConfig, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := pc.DecodeWeights(b)
		if err != nil {
			t.Fatal(err)
		}
		pn, err := pc.NewPolicy()
		if err != nil {
			t.Fatal(err)
		}
		dst := pn.(*Policy)
		if slices.Equal(forwardInBatches(dst, obs, n, dim, n), want) {
			t.Fatalf("%s: policies of two seeds agree before SetWeights", name)
		}
		if err := dst.SetWeights(v); err != nil {
			t.Fatal(err)
		}
		if got := forwardInBatches(dst, obs, n, dim, n); !slices.Equal(got, want) || dst.Version() != 12 {
			t.Fatalf("%s: rebuilt policy (version %d) differs from the source", name, dst.Version())
		}
		// Bad bytes and another model's weights are errors.
		if _, err := pc.DecodeWeights(b[:len(b)/2]); !errors.Is(err, weights.ErrCorrupt) {
			t.Fatalf("%s: truncated bytes: %v", name, err)
		}
		small, _ := NewPolicy(sp, AgentConfig{Hidden: []int{8}, Act: nn.Tanh}, rng.New(1, "test/init", 0))
		if err := dst.SetWeights(weights.New(13, small.Params())); !errors.Is(err, weights.ErrMismatch) || dst.Version() != 12 {
			t.Fatalf("%s: weights of another shape: %v (version %d)", name, err, dst.Version())
		}
	}
}

// chain is a one-env Vector whose episodes last 3 steps: observation = the
// step within the episode (0, 1, 2), reward 1, and episodes alternately end
// truncated (time limit) and terminated.
type chain struct {
	t, episode int
	b          env.Batch
}

func newChain() *chain {
	return &chain{b: env.Batch{ObsDim: 1, Obs: make([]float32, 1), Rewards: make([]float32, 1),
		Terminated: make([]bool, 1), Truncated: make([]bool, 1), Infos: make([]env.Info, 1), FinalObs: make([]float32, 1)}}
}

func (c *chain) NumEnvs() int                { return 1 }
func (c *chain) ObservationSpace() env.Space { return env.UniformBox(0, 10, 1) }
func (c *chain) ActionSpace() env.Space      { return env.Discrete{N: 2} }
func (c *chain) Close() error                { return nil }
func (c *chain) Reset(int64) (*env.Batch, error) {
	c.t = 0
	c.b.Obs[0] = 0
	return &c.b, nil
}
func (c *chain) Step([]float32) (*env.Batch, error) {
	c.t++
	c.b.Rewards[0] = 1
	c.b.Terminated[0], c.b.Truncated[0] = false, false
	c.b.Infos[0] = env.Info{}
	if c.t == 3 {
		if c.episode%2 == 0 {
			c.b.Truncated[0] = true
		} else {
			c.b.Terminated[0] = true
		}
		c.b.Infos[0] = env.Info{HasEpisode: true, Episode: env.EpisodeStats{Return: 3, Length: 3}}
		c.b.FinalObs[0] = float32(c.t)
		c.episode++
		c.t = 0
	}
	c.b.Obs[0] = float32(c.t)
	return &c.b, nil
}

type episodeLog struct {
	algo.Logger
	steps []int64
}

func (l *episodeLog) Episode(step int64, _ float64, length int) { l.steps = append(l.steps, step) }

// TestSegmentWorkerBootstrapsTruncation: with the onpolicy pieces, a
// truncated episode's last reward gets γ·V(true final observation); a
// terminated one does not; Dones marks both; the episodes are reported at
// the global steps they ended.
func TestSegmentWorkerBootstrapsTruncation(t *testing.T) {
	envs := newChain()
	sp := algo.SpacesOf(envs)
	p, err := NewPolicy(sp, AgentConfig{Hidden: []int{8}, Act: nn.Tanh, OrthoInit: true}, rng.New(1, "test/agent", 0))
	if err != nil {
		t.Fatal(err)
	}
	// Make V non-trivial so that the bootstrap is visible.
	for _, q := range p.agent.critic.Params() {
		for i := range q.Value {
			q.Value[i] += 0.3
		}
	}
	s, err := NewSampler(sp, rng.New(1, "test/act", 0))
	if err != nil {
		t.Fatal(err)
	}
	const gamma = 0.9
	w := rollout.NewSegments(2, envs, rollout.NewInline(p, s), gamma)
	seg := sample.NewSegment(6, 1, 1, 1)
	if err := w.Collect(seg); err == nil {
		t.Fatal("Collect before Reset: want an error")
	}
	if err := w.Reset(0); err != nil {
		t.Fatal(err)
	}
	if err := w.Collect(seg); err != nil {
		t.Fatal(err)
	}
	v := p.agent.Value(make([]float32, 1), []float32{3}, 1)
	wantRewards := []float32{1, 1, 1 + gamma*v[0], 1, 1, 1}
	wantDones := []float32{0, 0, 1, 0, 0, 1}
	if !slices.Equal(seg.Rewards, wantRewards) || !slices.Equal(seg.Dones, wantDones) {
		t.Fatalf("rewards %v dones %v, want %v %v", seg.Rewards, seg.Dones, wantRewards, wantDones)
	}
	if !slices.Equal(seg.Obs, []float32{0, 1, 2, 0, 1, 2}) || seg.Worker != 2 || seg.Version != 0 {
		t.Fatalf("obs %v worker %d version %d", seg.Obs, seg.Worker, seg.Version)
	}
	if seg.NextObs[0] != 0 || seg.LastValues[0] != p.agent.Value(make([]float32, 1), []float32{0}, 1)[0] {
		t.Fatalf("next obs %v, last value %v", seg.NextObs, seg.LastValues)
	}
	log := &episodeLog{Logger: algo.Discard()}
	if step := rollout.LogEpisodes(log, seg, 100); step != 106 || !slices.Equal(log.steps, []int64{103, 106}) {
		t.Fatalf("global step %d, episodes logged at %v; want 106 and [103 106]", step, log.steps)
	}
	if err := w.Collect(sample.NewSegment(6, 2, 1, 1)); err == nil {
		t.Fatal("a segment of 2 envs for 1 env: want an error")
	}
	// A policy without ValuesTo: the worker reads V(s) off the rows, with
	// the same bits.
	s2, _ := NewSampler(sp, rng.New(1, "test/act", 0))
	w2 := rollout.NewSegments(2, newChain(), rollout.NewInline(struct{ algo.PolicyNet }{p}, s2), gamma)
	seg2 := sample.NewSegment(6, 1, 1, 1)
	if err := w2.Reset(0); err != nil {
		t.Fatal(err)
	}
	if err := w2.Collect(seg2); err != nil {
		t.Fatal(err)
	}
	a, _ := seg.AppendEncode(nil)
	b, _ := seg2.AppendEncode(nil)
	if !slices.Equal(a, b) {
		t.Fatal("the segment differs when the worker reads values off the rows")
	}
}

// TestLearnerRejectsBadSegments: a segment that does not fit the agent is
// an error wrapping sample.ErrShape, never a panic.
func TestLearnerRejectsBadSegments(t *testing.T) {
	sp := testSpaces["discrete"]
	opt, _ := nn.NewAdam(nn.AdamConfig{LR: 1e-3})
	l, err := NewLearner("test", algo.Header{Seed: 1}, sp, AgentConfig{Hidden: []int{4}, Act: nn.Tanh}, opt, 10, 0.99, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	good := sample.NewSegment(2, 3, 4, 1)
	if it, err := l.Begin(ctx, good); err != nil || it != 1 || l.Weights().N != 1 {
		t.Fatalf("good segment: iteration %d, %v", it, err)
	}
	bad := []*sample.Segment{sample.NewSegment(2, 3, 5, 1), sample.NewSegment(2, 3, 4, 2), {T: 2, N: 3, ObsDim: 4, ActDim: 1}}
	idx := sample.NewSegment(2, 3, 4, 1)
	idx.Actions[4] = 3
	frac := sample.NewSegment(2, 3, 4, 1)
	frac.Actions[0] = 0.5
	for i, seg := range append(bad, idx, frac) {
		if _, err := l.Begin(ctx, seg); !errors.Is(err, sample.ErrShape) {
			t.Errorf("bad segment %d: %v", i, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Begin(cancelled, good); !errors.Is(err, context.Canceled) || l.Weights().N != 1 {
		t.Fatalf("cancelled: %v, version %d", err, l.Weights().N)
	}
}
