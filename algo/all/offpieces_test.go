package all

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
	"herd/replay"
	"herd/sample"
	"herd/weights"
)

// offCase is one off-policy run configuration for the pieces tests.
type offCase struct {
	name, algo, env string
	set             []string
}

// offCases cover every off-policy algorithm and its sampler variants.
var offCases = []offCase{
	{"dqn", "dqn", "CartPole-v1", []string{"learning_starts=100", "batch_size=32", "train_frequency=1"}},
	{"dqn-per-double-3step", "dqn", "CartPole-v1", []string{"learning_starts=100", "batch_size=32", "train_frequency=1",
		"double_q=true", "prioritized=true", "n_steps=3"}},
	{"sac", "sac", "Pendulum-v1", []string{"learning_starts=100", "batch_size=32", "net_arch=[32,32]"}},
	{"td3", "td3", "Pendulum-v1", []string{"learning_starts=100", "batch_size=32", "net_arch=[32,32]"}},
	{"td3-ou", "td3", "Pendulum-v1", []string{"learning_starts=100", "batch_size=32", "net_arch=[32,32]", "noise_type=ou"}},
	{"ddpg", "ddpg", "Pendulum-v1", []string{"learning_starts=100", "batch_size=32", "net_arch=[32,32]"}},
}

// resolve resolves c as `herd train --algo … --env … --steps … --seed 1
// --set …` does.
func (c offCase) resolve(t testing.TB, steps int64) *algo.Resolved {
	t.Helper()
	seed := uint64(1)
	res, err := algo.Resolve(nil, Specs(), algo.Overrides{Algo: &c.algo, Env: &c.env, Steps: &steps, Seed: &seed, Set: c.set})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// pieces builds c's pieces for a run of steps.
func (c offCase) pieces(t testing.TB, steps int64) (*algo.Pieces, algo.Spaces) {
	t.Helper()
	res := c.resolve(t, steps)
	e, err := env.Make(c.env)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sp := algo.SpacesOf(e)
	if res.Spec.Pieces == nil {
		t.Fatalf("%s: Spec.Pieces is nil", c.algo)
	}
	p, err := res.Spec.Pieces(res.Header, res.Config, sp)
	if err != nil {
		t.Fatal(err)
	}
	if p.NewTransitionLearner == nil || p.NewReplay == nil || p.NewAssembler == nil || p.NewSegmentLearner != nil {
		t.Fatalf("%s: off-policy pieces incomplete", c.name)
	}
	return p, sp
}

// randObs returns n observations of dim values drawn from r.
func randObs(r *rand.Rand, n, dim int) []float32 {
	o := make([]float32, n*dim)
	for i := range o {
		o[i] = float32(r.NormFloat64())
	}
	return o
}

// TestOffPolicyRowsIndependentOfBatch: the policy's outputs for a row are
// the same bits whether it is forwarded alone, in a batch of 7 or of 64.
func TestOffPolicyRowsIndependentOfBatch(t *testing.T) {
	for _, c := range offCases {
		p, sp := c.pieces(t, 1000)
		pol, err := p.NewPolicy()
		if err != nil {
			t.Fatal(err)
		}
		d, k := sp.Obs.Dim(), pol.OutDim()
		obs := randObs(rng.New(1, "test/obs", 0), 64, d)
		all := append([]float32(nil), pol.ForwardTo(make([]float32, 64*k), obs, 64)...)
		for _, n := range []int{1, 7} {
			for start := 0; start+n <= 64; start += 9 {
				got := pol.ForwardTo(make([]float32, n*k), obs[start*d:(start+n)*d], n)
				for j, v := range got {
					if v != all[start*k+j] {
						t.Fatalf("%s: row %d output %d is %v at batch %d, %v at batch 64", c.name, start+j/k, j%k, v, n, all[start*k+j])
					}
				}
			}
		}
	}
}

// TestOffPolicySamplersDependOnlyOnTheirStream: two samplers of the same
// env worker id draw the same actions from the same outputs, whether those
// rows were computed alone or inside a larger batch of other workers'
// rows; another id draws differently.
func TestOffPolicySamplersDependOnlyOnTheirStream(t *testing.T) {
	const numEnvs, at = 5, 20
	for _, c := range offCases {
		p, sp := c.pieces(t, 1000)
		pol, err := p.NewPolicy()
		if err != nil {
			t.Fatal(err)
		}
		d, k := sp.Obs.Dim(), pol.OutDim()
		r := rng.New(2, "test/obs", 0)
		a, _ := p.NewSampler(numEnvs, rng.New(1, "env-worker", 3))
		b, _ := p.NewSampler(numEnvs, rng.New(1, "env-worker", 3))
		o, _ := p.NewSampler(numEnvs, rng.New(1, "env-worker", 4))
		var actA, actB, actO algo.Acts
		differs := false
		for i, step := range []int64{0, 50, 100, 400, 999} { // before and after learning starts
			obs := randObs(r, 64, d)
			alone := append([]float32(nil), pol.ForwardTo(make([]float32, numEnvs*k), obs[at*d:(at+numEnvs)*d], numEnvs)...)
			inBatch := pol.ForwardTo(make([]float32, 64*k), obs, 64)[at*k : (at+numEnvs)*k]
			a.SampleTo(&actA, alone, numEnvs, step)
			b.SampleTo(&actB, inBatch, numEnvs, step)
			o.SampleTo(&actO, alone, numEnvs, step)
			for j := range actA.Actions {
				if actA.Actions[j] != actB.Actions[j] || actA.EnvActions[j] != actB.EnvActions[j] {
					t.Fatalf("%s step %d: action %d is %v/%v from one sampler, %v/%v from the other",
						c.name, step, j, actA.Actions[j], actA.EnvActions[j], actB.Actions[j], actB.EnvActions[j])
				}
				differs = differs || actA.Actions[j] != actO.Actions[j]
				if !sp.Act.Contains(actA.EnvActions[j/sp.Act.Dim()*sp.Act.Dim() : (j/sp.Act.Dim()+1)*sp.Act.Dim()]) {
					t.Errorf("%s step %d: env action %v outside %v", c.name, step, actA.EnvActions, sp.Act)
				}
			}
			if i == 2 {
				for _, s := range []algo.Sampler{a, b} {
					if er, ok := s.(algo.EnvResetter); ok {
						er.ResetEnv(1)
					}
				}
			}
		}
		if !differs {
			t.Errorf("%s: env workers 3 and 4 drew the same actions; the comparison cannot fail", c.name)
		}
	}
}

// fillReplay stores n transitions of random observations and valid
// actions (assembled from random env batches) into rb.
func fillReplay(t testing.TB, p *algo.Pieces, sp algo.Spaces, rb algo.Replay, n int) {
	t.Helper()
	asm, err := p.NewAssembler(1)
	if err != nil {
		t.Fatal(err)
	}
	r := rng.New(3, "test/replay", 0)
	d, ad := sp.Obs.Dim(), sp.Act.Dim()
	act := make([]float32, ad)
	var tr sample.Transitions
	for i := range n {
		next := randObs(r, 1, d)
		b := &env.Batch{ObsDim: d, Obs: next, Rewards: []float32{float32(r.NormFloat64())},
			Terminated: []bool{i%37 == 36}, Truncated: []bool{false}, Infos: make([]env.Info, 1), FinalObs: next}
		sp.Act.SampleTo(act, r)
		if _, ok := sp.Act.(env.Discrete); ok {
			act[0] -= float32(sp.Act.(env.Discrete).Start)
		}
		if err := asm.Add(&tr, randObs(r, 1, d), act, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := rb.Add(&tr); err != nil {
		t.Fatal(err)
	}
}

// TestOffPolicyWeightsRebuildThePolicy: a learner's weights, encoded as
// safetensors bytes and decoded against a policy built from the run
// config alone, give the same outputs as the version itself; the outputs
// differ from the initial weights' (so the comparison can fail).
func TestOffPolicyWeightsRebuildThePolicy(t *testing.T) {
	for _, c := range offCases {
		p, sp := c.pieces(t, 1000)
		l, err := p.NewTransitionLearner()
		if err != nil {
			t.Fatal(err)
		}
		rb, err := p.NewReplay()
		if err != nil {
			t.Fatal(err)
		}
		fillReplay(t, p, sp, rb, 200)
		stats, err := l.Learn(context.Background(), rb, 100, 110)
		if err != nil || len(stats) == 0 {
			t.Fatalf("%s: Learn = %v, %v; want scalars", c.name, stats, err)
		}
		v := l.Weights()
		if v.N == 0 {
			t.Errorf("%s: version 0 after 10 steps of updates", c.name)
		}
		b, err := v.Encode()
		if err != nil {
			t.Fatal(err)
		}
		fresh, _ := p.NewPolicy()
		fromBytes, _ := p.NewPolicy()
		fromVersion, _ := p.NewPolicy()
		like := fromBytes.(interface{ Params() []*nn.Param }).Params()
		dv, err := weights.Decode(b, like)
		if err != nil {
			t.Fatal(err)
		}
		if err := fromBytes.SetWeights(dv); err != nil {
			t.Fatal(err)
		}
		if err := fromVersion.SetWeights(v); err != nil {
			t.Fatal(err)
		}
		if fromBytes.Version() != v.N {
			t.Errorf("%s: rebuilt policy at version %d, want %d", c.name, fromBytes.Version(), v.N)
		}
		k := fresh.OutDim()
		obs := randObs(rng.New(4, "test/obs", 0), 16, sp.Obs.Dim())
		want := append([]float32(nil), fromVersion.ForwardTo(make([]float32, 16*k), obs, 16)...)
		got := fromBytes.ForwardTo(make([]float32, 16*k), obs, 16)
		init := fresh.ForwardTo(make([]float32, 16*k), obs, 16)
		same := true
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("%s: output %d is %v from bytes, %v from the version", c.name, j, got[j], want[j])
			}
			same = same && init[j] == want[j]
		}
		if same {
			t.Errorf("%s: learning changed no output; the comparison cannot fail", c.name)
		}
		if _, err := weights.Decode(b[:len(b)/2], like); err == nil {
			t.Errorf("%s: truncated bytes decoded", c.name)
		}
		l.Close()
	}
}

// bitCases are the runs whose model.safetensors was recorded from the
// code before the pieces (commit c7b923d) with
//
//	herd train --quiet --seed 1 --algo A --env E --steps S --set … --out DIR
//
// (the script is in docs/BENCHMARKS.md, "Learning"). All of them have num_envs ≤ train_frequency (DQN) or one
// env (SAC, TD3, DDPG), where the old loop already did what its doc said,
// so the pieces must reproduce them bit for bit.
var bitCases = []struct {
	offCase
	steps  int64
	sha256 string
}{
	{offCase{"dqn", "dqn", "CartPole-v1", []string{"learning_starts=1000"}}, 12000,
		"8ec1c7c7fd5548bbe296b124bbd3ae1cf8872e578004c6b5c17994577dc6ed9d"},
	{offCase{"dqn-per-double-3step", "dqn", "CartPole-v1", []string{"learning_starts=1000", "double_q=true",
		"prioritized=true", "n_steps=3", "train_frequency=4", "target_network_frequency=200"}}, 8000,
		// Before the pieces: 96c8c878…3d943d, matched by the pieces until
		// the sum tree stored leaf priorities as float32 (issue 15, merge
		// 2026-11-23): prioritized replay now draws from priorities rounded
		// to float32, so this one run's bits changed on purpose. The hash
		// below is the pieces' on that tree (checked: the merge before the
		// tree change still gives 96c8c878…).
		"8537436dec3b1f32495468349145eaeacff68a08d7613d4d20a31ee131e12428"},
	{offCase{"dqn-4envs", "dqn", "CartPole-v1", []string{"num_envs=4", "learning_starts=1000", "train_frequency=4",
		"target_network_frequency=100"}}, 8000,
		"aaf8009e8cb2460be88247f5b800c17002521f2b41349f59c8c3c5c5afdf2a99"},
	{offCase{"sac", "sac", "Pendulum-v1", []string{"learning_starts=500", "batch_size=64", "net_arch=[64,64]"}}, 2000,
		"0e58b40e48dd0eb771330e90272cf6890a23d6ac8c96c9247ab3ece247c2d992"},
	{offCase{"td3", "td3", "Pendulum-v1", []string{"learning_starts=500", "batch_size=64", "net_arch=[64,64]"}}, 2000,
		"71cbd32b9306a0a600fb76200a285e37069928bd85c7f35d9c6cfc11939b8753"},
	{offCase{"td3-ou", "td3", "Pendulum-v1", []string{"learning_starts=500", "batch_size=64", "net_arch=[64,64]",
		"noise_type=ou"}}, 2000,
		"88f122470b31638f15076e53bac370955507f4d08cc3bac24c3d1205fa4593be"},
	{offCase{"ddpg", "ddpg", "Pendulum-v1", []string{"learning_starts=500", "batch_size=64", "net_arch=[64,64]"}}, 2000,
		"4bd4f6cf40a825ff835741ff459dae030f007213e1572990d62842958ac7d2f3"},
}

// TestOffPolicySameBitsAsBeforeThePieces trains each bitCase with the
// local executor and compares the sha256 of model.safetensors with the one
// the loop before the pieces wrote.
func TestOffPolicySameBitsAsBeforeThePieces(t *testing.T) {
	if learntest.RaceEnabled {
		t.Skip("the same runs take minutes under -race; the test runs in the ordinary build")
	}
	dir := t.TempDir()
	for _, c := range bitCases {
		t.Run(c.name, func(t *testing.T) {
			res := c.resolve(t, c.steps)
			res.Header.EnsureDefaults()
			model, err := res.Spec.Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Config)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, c.name+".safetensors")
			if err := model.Save(path); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if got := hex.EncodeToString(sum[:]); got != c.sha256 {
				t.Errorf("model.safetensors sha256 %s, before the pieces %s (herd train --algo %s --env %s --steps %d --set %s)",
					got, c.sha256, c.algo, c.env, c.steps, strings.Join(c.set, " --set "))
			}
		})
	}
}

// TestOffPolicyReplayRatioIndependentOfNumEnvs: the number of updates a
// learner makes over the same env steps does not depend on how many env
// steps each call covers (num_envs): DQN trains gradient_steps times per
// multiple of train_frequency passed (with 16 envs and train_frequency 4,
// four rounds per vector step, as dqn/doc.go says), SAC, TD3 and DDPG once
// per env step. The weight version counts the updates.
func TestOffPolicyReplayRatioIndependentOfNumEnvs(t *testing.T) {
	cases := []struct {
		offCase
		want uint64 // updates over the env steps (100, 192]
	}{
		{offCase{"dqn-tf4-gs2", "dqn", "CartPole-v1", []string{"learning_starts=100", "batch_size=32",
			"train_frequency=4", "gradient_steps=2"}}, 23 * 2},
		{offCases[2], 92}, {offCases[3], 92}, {offCases[5], 92},
	}
	for _, c := range cases {
		p, sp := c.pieces(t, 1000)
		rb, err := p.NewReplay()
		if err != nil {
			t.Fatal(err)
		}
		fillReplay(t, p, sp, rb, 200)
		for _, n := range []int64{1, 4, 16} {
			l, err := p.NewTransitionLearner()
			if err != nil {
				t.Fatal(err)
			}
			// Steps up to learning_starts (100) train nothing, also when
			// a call covers steps on both sides of it.
			for prev := int64(0); prev < 192; prev += n {
				if _, err := l.Learn(context.Background(), rb, prev, prev+n); err != nil {
					t.Fatal(err)
				}
			}
			if got := l.Weights().N; got != c.want {
				t.Errorf("%s with %d envs: %d updates over the env steps (100, 192], want %d", c.name, n, got, c.want)
			}
			l.Close()
		}
	}
}

// TestOffPolicyPiecesRejectBadInput: wrong config types, invalid configs,
// wrong spaces and a missing stream are errors, not panics.
func TestOffPolicyPiecesRejectBadInput(t *testing.T) {
	cart, _ := env.Make("CartPole-v1")
	defer cart.Close()
	pend, _ := env.Make("Pendulum-v1")
	defer pend.Close()
	for _, c := range offCases {
		res := c.resolve(t, 1000)
		own, other := algo.SpacesOf(pend), algo.SpacesOf(cart)
		if c.env == "CartPole-v1" {
			own, other = other, own
		}
		if _, err := res.Spec.Pieces(res.Header, res.Config, other); err == nil {
			t.Errorf("%s: pieces built for the other kind of action space", c.name)
		}
		if _, err := res.Spec.Pieces(res.Header, res.Config, algo.Spaces{}); err == nil {
			t.Errorf("%s: pieces built for empty spaces", c.name)
		}
		if _, err := res.Spec.Pieces(res.Header, nil, other); err == nil {
			t.Errorf("%s: pieces built from a nil config", c.name)
		}
		if err := algo.Set(res.Config, "batch_size=0"); err != nil {
			t.Fatal(err)
		}
		if _, err := res.Spec.Pieces(res.Header, res.Config, own); err == nil {
			t.Errorf("%s: pieces built with batch_size 0", c.name)
		}
		p, _ := c.pieces(t, 1000)
		if _, err := p.NewSampler(4, nil); err == nil {
			t.Errorf("%s: a sampler without a stream", c.name)
		}
	}
}

// TestOffPolicyReplayLocking: every off-policy algorithm's replay — the one
// PAL's actors and learners share — uses replay.TwoLock (the PAL paper's
// two locks, not its lazy writing) unless runtime.replay_locking is global.
func TestOffPolicyReplayLocking(t *testing.T) {
	for _, c := range offCases {
		for _, lock := range []string{"", "two-lock", "global"} {
			res := c.resolve(t, 1000)
			res.Header.Runtime.ReplayLocking = lock
			e, err := env.Make(c.env)
			if err != nil {
				t.Fatal(err)
			}
			p, err := res.Spec.Pieces(res.Header, res.Config, algo.SpacesOf(e))
			e.Close()
			if err != nil {
				t.Fatal(err)
			}
			rb, err := p.NewReplay()
			if err != nil {
				t.Fatal(err)
			}
			l, ok := rb.(interface{ Locking() replay.Locking })
			if !ok {
				t.Fatalf("%s: replay %T does not report its locking", c.name, rb)
			}
			want := replay.TwoLock
			if lock == "global" {
				want = replay.GlobalLock
			}
			if got := l.Locking(); got != want {
				t.Errorf("%s, replay_locking %q: %v, want %v", c.name, lock, got, want)
			}
		}
	}
}
