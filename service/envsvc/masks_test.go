package envsvc

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"herd/algo"
	"herd/algo/all"
	"herd/env"
	"herd/internal/pyproc"
	"herd/internal/rng"
	herdv1 "herd/proto/herd/v1"
)

// maskedWalk is python/tests/pyparallel.py's MaskedWalk in Go: LineWalk
// whose agents report action masks in their infos and whose env has a
// global state of its own (8 values; the observations concatenated are 7).
type maskedWalk struct{ *lineWalk }

func newMaskedWalk() (env.Parallel, error) { return maskedWalk{newLineWalk()}, nil }

func (w maskedWalk) masks(obs map[string][]float32) map[string]env.Info {
	for i, a := range w.possible {
		if _, ok := obs[a]; ok {
			w.infos[a] = env.Info{ActionMask: []bool{w.pos[a] > -3, true, (i+w.t)%2 == 0}}
		}
	}
	return w.infos
}

func (w maskedWalk) Reset(seed int64) (map[string][]float32, map[string]env.Info, error) {
	obs, _, err := w.lineWalk.Reset(seed)
	return obs, w.masks(obs), err
}

func (w maskedWalk) Step(actions map[string][]float32) (map[string][]float32, map[string]float64, map[string]bool, map[string]bool, map[string]env.Info, error) {
	obs, rew, term, trunc, _, err := w.lineWalk.Step(actions)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	return obs, rew, term, trunc, w.masks(obs), nil
}

func (w maskedWalk) GlobalState(dst []float32) []float32 {
	dst = append(dst[:0], float32(w.t))
	for _, a := range w.possible {
		dst = append(dst, float32(w.pos[a]))
	}
	for _, a := range w.possible {
		dst = append(dst, float32(w.goal[a]))
	}
	return append(dst, float32(len(w.agents)))
}

func (w maskedWalk) GlobalStateSpace() env.Space {
	lo, hi := make([]float32, 8), make([]float32, 8)
	for i := range lo {
		lo[i], hi[i] = -20, 20
	}
	b, _ := env.NewBox(lo, hi)
	return b
}

// maskedWalkEnvs serves MaskedWalk from herd's Go server.
var maskedWalkEnvs = map[string]func() (env.Parallel, error){"MaskedWalk": newMaskedWalk}

// TestRemoteMasksAndStateGo: a Go env with action masks and a global
// state of its own, served by herd serve env's server (Config.ParallelEnvs),
// reaches herd as the local env does: Describe lists it; as a Parallel
// every agent's info mask and the env's GlobalState (and its space) arrive
// exactly; as rows with agent_id, action_mask and state every batch is the
// local FlatVector's bits, masks and state columns and infos included.
func TestRemoteMasksAndStateGo(t *testing.T) {
	addr, _ := startServerWith(t, nil, 0, Config{MaxEnvs: 64, MaxSessions: 8, ParallelEnvs: maskedWalkEnvs})
	d, err := New(Config{ParallelEnvs: maskedWalkEnvs}).Describe(context.Background(), &herdv1.DescribeRequest{})
	if err != nil || !slices.Contains(d.GetParallelEnvIds(), "MaskedWalk") || !slices.Contains(d.GetParallelEnvIds(), "mpe/simple_spread_v3") {
		t.Fatalf("Describe: %v %v", d.GetParallelEnvIds(), err)
	}
	checkMaskedWalk(t, "grpc://"+addr+"/MaskedWalk?timeout=20s")
}

// TestPythonMasksAndState: the Python server carries a PettingZoo env's
// info["action_mask"] and its state()/state_space
// (python/tests/pyparallel.py's MaskedWalk) exactly as the Go copy has
// them; an env without state() (LineWalk) leaves the state to herd (the
// observations concatenated).
func TestPythonMasksAndState(t *testing.T) {
	p := pyproc.Start(t, "herd_env.serve", "--env", "pyparallel:MaskedWalk")
	checkMaskedWalk(t, "grpc://"+p.Addr()+"/MaskedWalk?timeout=20s")

	lw := pyproc.Start(t, "herd_env.serve", "--env", "pyparallel:LineWalk")
	v, err := envs().MakeVector("grpc://"+lw.Addr()+"/LineWalk?timeout=20s&state=true&action_mask=true", 3, env.Sync)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if l := v.(interface{ RowLayout() env.RowLayout }).RowLayout(); l.State != 7 || l.Mask != 3 {
		t.Fatalf("LineWalk layout %+v, want the 7 observations as state and 3 mask columns", l)
	}
	b, err := v.Reset(1)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		if m := b.ObsRow(r)[3:6]; !slices.Equal(m, []float32{1, 1, 1}) || b.Infos[r].ActionMask != nil {
			t.Fatalf("row %d: mask columns %v, info %+v, want all legal without a mask", r, m, b.Infos[r])
		}
	}
}

// checkMaskedWalk compares the remote MaskedWalk of id (an id with a
// query, no row options) with the Go copy.
func checkMaskedWalk(t *testing.T, id string) {
	t.Helper()
	rp, err := envs().MakeParallel(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	rg, ok := rp.(env.GlobalState)
	if !ok {
		t.Fatalf("%s: the remote env is no GlobalState", id)
	}
	lpp, _ := newMaskedWalk()
	lp, lg := lpp.(maskedWalk), lpp.(env.GlobalState)
	if rg.GlobalStateSpace().String() != lg.GlobalStateSpace().String() {
		t.Fatalf("%s: state space %v, want %v", id, rg.GlobalStateSpace(), lg.GlobalStateSpace())
	}
	sameInfos := func(ep, k int, want, got map[string]env.Info) {
		t.Helper()
		if !maps.EqualFunc(want, got, func(a, b env.Info) bool { return reflect.DeepEqual(a, b) }) {
			t.Fatalf("%s episode %d step %d: infos %+v, want %+v", id, ep, k, got, want)
		}
		sameSlice(t, "global state", lg.GlobalState(nil), rg.GlobalState(nil))
	}
	r := rng.New(5, "test/masked-walk", 0)
	illegal := 0 // masked-out actions seen
	for ep := range 8 {
		seed := int64(ep * 7)
		if ep%3 == 2 {
			seed = env.NoSeed
		}
		ro, ri, err := rp.Reset(seed)
		if err != nil {
			t.Fatal(err)
		}
		lo, li, _ := lp.Reset(seed)
		sameObs(t, ep, -1, lo, ro)
		sameInfos(ep, -1, li, ri)
		for k := 0; len(lp.Agents()) > 0; k++ {
			acts := map[string][]float32{}
			for _, a := range lp.Agents() {
				acts[a] = []float32{float32(r.IntN(3))}
			}
			ro, _, _, _, ri, err := rp.Step(acts)
			if err != nil {
				t.Fatal(err)
			}
			lo, _, _, _, li, _ := lp.Step(acts)
			sameObs(t, ep, k, lo, ro)
			sameInfos(ep, k, li, ri)
			for _, in := range ri {
				illegal += len(in.ActionMask) - countTrue(in.ActionMask)
			}
		}
	}
	if illegal == 0 {
		t.Fatal("no action was ever masked: the test misses masks")
	}

	const rows = 9
	remote, err := envs().MakeVector(id+"&agent_id=true&action_mask=true&state=true", rows, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	pv, err := env.NewParallelVector(rows/3, func(int) (env.Parallel, error) { return newMaskedWalk() })
	if err != nil {
		t.Fatal(err)
	}
	local, err := env.NewFlatVector(pv, env.FlatOptions{AgentID: true, ActionMask: true, State: true, EpisodeStatistics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	ll, rl := local.RowLayout(), remote.(interface{ RowLayout() env.RowLayout }).RowLayout()
	if ll != rl || rl.State != 8 || rl.Mask != 3 {
		t.Fatalf("%s: layout %+v, local %+v (want 8 state values, 3 mask columns)", id, rl, ll)
	}
	if local.ObservationSpace().String() != remote.ObservationSpace().String() {
		t.Fatalf("%s: row space %v, local %v", id, remote.ObservationSpace(), local.ObservationSpace())
	}
	lb, err := local.Reset(4)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := remote.Reset(4)
	if err != nil {
		t.Fatal(err)
	}
	compareBatch(t, id, -1, lb, rb, false)
	if !reflect.DeepEqual(lb.Infos, rb.Infos) {
		t.Fatalf("%s: reset infos %+v, local %+v", id, rb.Infos, lb.Infos)
	}
	act := make([]float32, rows)
	for step := range 60 {
		for i := range act {
			act[i] = float32(r.IntN(3))
		}
		if lb, err = local.Step(act); err != nil {
			t.Fatal(err)
		}
		if rb, err = remote.Step(act); err != nil {
			t.Fatal(err)
		}
		compareBatch(t, id, step, lb, rb, true)
	}
	if local.DeadRowSteps() == 0 {
		t.Fatal("no dead rows: the vector test misses agents leaving")
	}

	// Rows without state=true: the session does not ask for the state,
	// and the server sends none.
	plain, err := envs().MakeVector(id+"&action_mask=true", 3, env.Sync)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Reset(1); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Step([]float32{1, 1, 1}); err != nil {
		t.Fatal(err)
	}

	// The turn view (env.Make: evaluation) writes the same rows.
	re, err := envs().Make(id + "&agent_id=true&action_mask=true&state=true")
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	lpt, _ := newMaskedWalk()
	le, err := env.NewTurnEnv(lpt, env.FlatOptions{AgentID: true, ActionMask: true, State: true})
	if err != nil {
		t.Fatal(err)
	}
	defer le.Close()
	for ep := range 3 {
		ro, _, err := re.Reset(int64(ep))
		if err != nil {
			t.Fatal(err)
		}
		lo, _, _ := le.Reset(int64(ep))
		for k := 0; ; k++ {
			sameSlice(t, fmt.Sprintf("%s turn view episode %d step %d", id, ep, k), lo, ro)
			a := []float32{float32(r.IntN(3))}
			var lt, ltr, rt, rtr bool
			lo, _, lt, ltr, _, _ = le.Step(a)
			if ro, _, rt, rtr, _, err = re.Step(a); err != nil {
				t.Fatal(err)
			}
			if lt != rt || ltr != rtr {
				t.Fatalf("%s turn view episode %d step %d: ends %v %v, local %v %v", id, ep, k, rt, rtr, lt, ltr)
			}
			if lt || ltr {
				sameSlice(t, "turn view final row", lo, ro)
				break
			}
		}
	}
}

func countTrue(m []bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// TestTrainRemoteMaskedWalk: MAPPO (configs/mappo-simple-spread.yaml's
// settings) with action_mask=true and state=true on MaskedWalk served by
// herd's Go server ends with the same parameters, bit for bit, as on the
// same env in this process (Runtime.Envs): the masks PPO honours and the
// state its critic reads are the env's own.
func TestTrainRemoteMaskedWalk(t *testing.T) {
	if testing.Short() {
		t.Skip("trains PPO for two updates twice")
	}
	addr, _ := startServerWith(t, nil, 0, Config{MaxEnvs: 64, MaxSessions: 8, ParallelEnvs: maskedWalkEnvs})
	id := "grpc://" + addr + "/MaskedWalk?timeout=20s&agent_id=true&action_mask=true&state=true"
	train := func(local bool) []float32 {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(pyproc.Root(), "configs", "mappo-simple-spread.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		// the config's settings, its env replaced and actor_obs set to
		// MaskedWalk's padded observation (3) and one-hot id (3)
		data = bytes.Replace(data, []byte("actor_obs: 21"), []byte("actor_obs: 6"), 1)
		res, err := algo.Resolve(data, all.Specs(), algo.Overrides{Envs: envs(), Env: &id})
		if err != nil {
			t.Fatal(err)
		}
		n, T, _ := res.Config.(algo.Rollout).RolloutShape()
		h := res.Header
		h.Steps = int64(2 * n * T)
		rt := &algo.Runtime{Header: h, Log: algo.Discard()}
		if local {
			rt.Envs = func(n int) (env.Vector, error) {
				pv, err := env.NewParallelVector(n/3, func(int) (env.Parallel, error) { return newMaskedWalk() })
				if err != nil {
					return nil, err
				}
				return env.NewFlatVector(pv, env.FlatOptions{AgentID: true, ActionMask: true, State: true, EpisodeStatistics: true})
			}
		}
		m, err := res.Spec.Train(context.Background(), rt, res.Config)
		if err != nil {
			t.Fatal(err)
		}
		var out []float32
		for _, p := range m.(algo.ParamModel).Params() {
			out = append(out, p.Value...)
		}
		return out
	}
	sameParams(t, "MaskedWalk", train(true), train(false))
}
