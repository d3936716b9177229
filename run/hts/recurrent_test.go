package hts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/impala"
	"herd/algo/ppo"
	"herd/sample"
	"herd/weights"
)

// lstmFile is a small PPO-LSTM run: CartPoleNoVel's episodes end within
// the 6 segments, so states are reset inside and between segments.
const lstmFile = `algo: ppo
env: CartPoleNoVel-v1
seed: 7
steps: 1536
runtime: {executor: hts}
ppo: {num_envs: 4, num_steps: 64, num_minibatches: 2, update_epochs: 2, hidden: [16], recurrent: {type: lstm, hidden: 8}}
`

// impalaLSTMFile is lstmFile's run for IMPALA with an LSTM core.
const impalaLSTMFile = `algo: impala
env: CartPoleNoVel-v1
seed: 7
steps: 1536
runtime: {executor: hts}
impala: {num_envs: 4, num_steps: 64, hidden: [16], recurrent: {type: lstm, hidden: 8}}
`

// TestRecurrentSameBits is the HTS promise for a recurrent policy: the
// policy workers keep each env's state, so the final parameters are one
// hash for policy workers 1 and 4 and env workers 1 and 2, for PPO-LSTM
// and IMPALA-LSTM.
func TestRecurrentSameBits(t *testing.T) {
	for _, c := range []struct {
		spec algo.Spec
		file string
	}{{ppo.Spec(), lstmFile}, {impala.Spec(), impalaLSTMFile}} {
		res := resolve(t, c.spec, c.file)
		want := train(t, res, Options{EnvWorkers: 1, PolicyWorkers: 1})
		for _, ep := range [][2]int{{1, 4}, {2, 1}, {2, 4}, {4, 3}} {
			if got := train(t, res, Options{EnvWorkers: ep[0], PolicyWorkers: ep[1]}); got != want {
				t.Errorf("%s E=%d P=%d: parameters %s, with E=1 P=1 %s", c.spec.Name, ep[0], ep[1], got, want)
			}
		}
	}
}

// TestRecurrentSegmentState: each segment the learner gets records the
// states its envs start from, and the behaviour values in it are what the
// local loop gives: the policy replayed from those states with the
// segment's behaviour weights, each env's state zeroed after a step where
// its episode ended, yields seg.Values bit for bit.
func TestRecurrentSegmentState(t *testing.T) {
	res := resolve(t, ppo.Spec(), lstmFile)
	rec := &stateRecorder{weights: map[uint64]*weights.Version{}}
	spec := res.Spec
	inner := spec.Pieces
	spec.Pieces = func(h algo.Header, cfg algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
		p, err := inner(h, cfg, sp)
		if err != nil {
			return nil, err
		}
		rec.pieces = p
		newLearner := p.NewSegmentLearner
		p.NewSegmentLearner = func() (algo.SegmentLearner, error) {
			l, err := newLearner()
			rec.SegmentLearner = l
			return rec, err
		}
		return p, nil
	}
	if _, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, spec, res.Config,
		Options{EnvWorkers: 2, PolicyWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	if len(rec.segs) != 6 {
		t.Fatalf("%d segments learned, want 6", len(rec.segs))
	}
	net, err := rec.pieces.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	sn := net.(stateNet)
	sd, w := sn.StateDim(), net.OutDim()
	resets := 0
	for k, seg := range rec.segs {
		if len(seg.State) != seg.N*sd {
			t.Fatalf("segment %d: %d state values, want %d", k, len(seg.State), seg.N*sd)
		}
		if err := net.SetWeights(rec.weights[seg.Version]); err != nil {
			t.Fatalf("segment %d of version %d: %v", k, seg.Version, err)
		}
		state := slices.Clone(seg.State)
		out := make([]float32, seg.N*w)
		for t0 := range seg.T {
			row := t0 * seg.N
			sn.ForwardStateTo(out, seg.Obs[row*seg.ObsDim:(row+seg.N)*seg.ObsDim], state, seg.N)
			for i := range seg.N {
				if v := out[(i+1)*w-1]; v != seg.Values[row+i] {
					t.Fatalf("segment %d step %d env %d: replayed V %v, recorded %v", k, t0, i, v, seg.Values[row+i])
				}
				if seg.Dones[row+i] == 1 {
					clear(state[i*sd : (i+1)*sd])
					resets++
				}
			}
		}
	}
	if resets == 0 {
		t.Error("no episode ended: the test does not reach a reset")
	}
}

// stateRecorder keeps each segment it learns and the weights each Learn
// starts from (a segment's behaviour weights by version).
type stateRecorder struct {
	algo.SegmentLearner
	pieces  *algo.Pieces
	segs    []*sample.Segment
	weights map[uint64]*weights.Version
}

func (r *stateRecorder) Learn(ctx context.Context, seg *sample.Segment) ([]algo.Stat, error) {
	v := r.SegmentLearner.Weights()
	r.weights[v.N] = v
	c := *seg
	c.Obs, c.Values, c.Dones, c.State = slices.Clone(seg.Obs), slices.Clone(seg.Values), slices.Clone(seg.Dones), slices.Clone(seg.State)
	r.segs = append(r.segs, &c)
	return r.SegmentLearner.Learn(ctx, seg)
}

func (r *stateRecorder) Model() algo.Model { return r.SegmentLearner.(algo.Modeler).Model() }

// TestRecurrentSeveralPoliciesRefused: the several policies of a
// multiagent section must be stateless under hts (the capability table).
func TestRecurrentSeveralPoliciesRefused(t *testing.T) {
	file := strings.Replace(fmt.Sprintf(twoPolicies, 1, 1), "hidden: [16]}", "hidden: [16], recurrent: {type: lstm, hidden: 8}}", 1)
	res := resolve(t, ppo.Spec(), file)
	_, err := algo.AdmitRun([]algo.Executor{Executor()}, res)
	if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "stateless policy") {
		t.Errorf("got %v, want a refusal naming the stateless policy", err)
	}
}

// TestRecurrentResumeBitIdentical: a PPO-LSTM run under HTS, checkpointed
// with one layout of env and policy workers (E×P), killed (every
// checkpoint it wrote, kept, is the newest one a SIGKILL could leave) or
// stopped (early, mid-run while a segment is gathered and an update
// learned, just after a periodic checkpoint) and resumed with another,
// ends with the model bytes of the uninterrupted run. It fails if the
// envs' recurrent states the policy workers hold (policy/state), the
// segment's start states or the learner's env order are left out of the
// checkpoint: zero states or another order give other bits.
func TestRecurrentResumeBitIdentical(t *testing.T) {
	res := resolve(t, ppo.Spec(), lstmFile)
	h := res.Header
	seg := h.Steps / 6 // one segment's env steps
	rig := newResumeRig(t, res, 2*seg)
	newCK, resume := rig.checkpoints, rig.resume
	want, err := trainOpt(t, res, Options{EnvWorkers: 1, PolicyWorkers: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ run, resumed Options }{
		{Options{EnvWorkers: 2, PolicyWorkers: 3}, Options{EnvWorkers: 4, PolicyWorkers: 1}},
		{Options{EnvWorkers: 4, PolicyWorkers: 2}, Options{EnvWorkers: 1, PolicyWorkers: 2}},
	} {
		all := t.TempDir()
		if got, err := trainOpt(t, res, c.run, newCK(all, 100), nil); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%+v with checkpoints: %v, same model %v", c.run, err, bytes.Equal(got, want))
		}
		names := checkpointNames(t, all)
		if len(names) != 3 { // segments 2, 4 (periodic) and 6 (the end)
			t.Fatalf("%+v: checkpoints %v", c.run, names)
		}
		for i := range names {
			if got := resume(killedAfter(t, all, names[:i+1]), c.resumed); !bytes.Equal(got, want) {
				t.Fatalf("%+v, killed after %s, resumed with %+v: the model differs from the uninterrupted run's", c.run, names[i], c.resumed)
			}
		}
		for _, stop := range []*stopAt{{at: seg, now: true}, {at: 3 * seg}, {at: 4 * seg, now: true}} {
			dir := t.TempDir()
			if _, err := trainOpt(t, res, c.run, newCK(dir, 2), stop); !errors.Is(err, context.Canceled) {
				t.Fatalf("%+v, stopped at %d: %v, want context.Canceled", c.run, stop.at, err)
			}
			if got := resume(dir, c.resumed); !bytes.Equal(got, want) {
				t.Fatalf("%+v, stopped at %d (now %v), resumed with %+v from %v: the model differs from the uninterrupted run's",
					c.run, stop.at, stop.now, c.resumed, checkpointNames(t, dir))
			}
		}
	}
	// Without the envs' states the checkpoint is refused, naming the section.
	dir := t.TempDir()
	if _, err := trainOpt(t, res, Options{EnvWorkers: 2, PolicyWorkers: 2}, newCK(dir, 1), &stopAt{at: 3 * seg, now: true}); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	st, _, _, err := algo.LoadCheckpoint(dir, h.Algo, h.Env, rig.key)
	if err != nil {
		t.Fatal(err)
	}
	delete(st.Sections, secState)
	ck := newCK(t.TempDir(), 1)
	ck.Resume(st)
	if m, err := Train(context.Background(), &algo.Runtime{Header: h, Log: algo.Discard(), Checkpoints: ck}, res.Spec, res.Config, Options{}); err == nil || m != nil || !strings.Contains(err.Error(), secState) {
		t.Errorf("without section %s: model %v, error %v; want a refusal naming it", secState, m, err)
	}
}
