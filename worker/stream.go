package worker

import (
	"context"
	"math"
	"time"

	"herd/algo"
	"herd/env"
	"herd/internal/scratch"
	"herd/transport"
)

// streamPolicy is the rollout policy of an on-policy env worker: the
// outputs for its observations come from the policy workers over an
// inference stream (retried within the call timer), or from an inline
// copy (RunEnvInline), and are sampled here with the worker's own
// sampler. With env groups (groups non-nil) it is pipelined: block b's
// request is in flight from Prefetch(b) until ActBlock(b). A recurrent
// policy's states (envStates) are kept here, with the envs, and travel in
// the requests (rollout.StateKeeper, rollout.EnvResetter).
type streamPolicy struct {
	sampler   algo.Sampler
	val       Valuer
	infer     func(r *transport.InferRequest) error // one request, answered before it returns
	groups    []*envGroup
	req, boot *transport.InferRequest
	ver       uint64 // the version that answered the last Act
	st        envStates
	k         int         // envs per block
	reqIn     []float32   // the single request's rows with their states
	blockIn   [][]float32 // each block's
	bootIn    []float32
	err       error // an EnvValue's failed request, returned by the next call
	met       *EnvMetrics
	tm        *StepTiming
	ph        *phase
}

// newStreamPolicy is the policy of sampler s over inf, or over cp when it
// is set, for m envs in blocks of k whose policy carries a state of sd
// per env.
func newStreamPolicy(slot, m, k, sd int, s algo.Sampler, inf transport.InferenceStream, timer *callTimer, cp *inlineCopy, met *EnvMetrics, tm *StepTiming) *streamPolicy {
	val, ok := s.(Valuer)
	if !ok {
		val = lastColumn{}
	}
	p := &streamPolicy{sampler: s, val: val, met: met, tm: tm, ph: newPhase(tm != nil),
		req: &transport.InferRequest{Worker: slot}, boot: &transport.InferRequest{Worker: slot},
		st: envStates{sd: sd, state: make([]float32, m*sd)}, k: k, blockIn: make([][]float32, m/max(k, 1))}
	if cp != nil {
		p.infer = func(r *transport.InferRequest) error { cp.infer(r); return nil }
	} else {
		p.infer = func(r *transport.InferRequest) error {
			return retry(timer, func(c context.Context) error { return inf.Infer(c, r) })
		}
	}
	return p
}

// ask makes request r for rows input rows on the worker's goroutine.
func (p *streamPolicy) ask(r *transport.InferRequest, in []float32, rows int) ([]float32, error) {
	r.Rows, r.Obs, r.WeightsVersion = rows, in, math.MaxUint64
	var t0 time.Time
	if p.met != nil {
		t0 = time.Now()
	}
	p.ph.add(nil)
	err := p.infer(r)
	if p.met != nil && err == nil {
		p.met.infer.Observe(since(t0))
	}
	if p.tm != nil {
		p.ph.add(&p.tm.Infer)
		p.tm.Requests.Add(1)
	}
	return r.Out, err
}

// Prefetch sends block b's request, with env groups.
func (p *streamPolicy) Prefetch(b int, obs []float32) {
	if p.groups != nil {
		p.groups[b].send(p.st.in(&p.blockIn[b], obs, b*p.k, p.k))
	}
}

// ActBlock samples block b's actions from its outputs: those of the
// request in flight with env groups, else of a request made now.
func (p *streamPolicy) ActBlock(b int, acts *algo.Acts, obs []float32, n int, step int64) error {
	if p.err != nil {
		return p.err
	}
	var out []float32
	if p.groups != nil {
		p.ph.add(nil)
		o, ver, err := p.groups[b].recv()
		if err != nil {
			return err
		}
		if p.tm != nil {
			p.ph.add(&p.tm.Infer)
			p.tm.Requests.Add(1)
		}
		out, p.ver = o, ver
	} else {
		o, err := p.ask(p.req, p.st.in(&p.reqIn, obs, b*p.k, n), n)
		if err != nil {
			return err
		}
		out, p.ver = o, p.req.WeightsVersion
	}
	out, err := p.st.split(out, b*p.k, n, true)
	if err != nil {
		return err
	}
	p.sampler.SampleTo(acts, out, n, step)
	if p.tm != nil {
		p.ph.add(&p.tm.Sample)
	}
	return nil
}

func (p *streamPolicy) Act(acts *algo.Acts, obs []float32, n int, step int64) error {
	return p.ActBlock(0, acts, obs, n, step)
}

// ActVersion is the version of the weights that answered the last Act.
func (p *streamPolicy) ActVersion() uint64 { return p.ver }

// Values reads V(obs) off the outputs of a request made now (the
// truncation bootstraps and a segment's last values), for envs 0 … n−1
// from their states, which it does not advance.
func (p *streamPolicy) Values(dst, obs []float32, n int) ([]float32, error) {
	if p.err != nil {
		return nil, p.err
	}
	return p.values(dst, obs, 0, n)
}

// values is Values for envs lo … lo+n−1.
func (p *streamPolicy) values(dst, obs []float32, lo, n int) ([]float32, error) {
	out, err := p.ask(p.boot, p.st.in(&p.bootIn, obs, lo, n), n)
	if err == nil {
		out, err = p.st.split(out, lo, n, false)
	}
	if err != nil {
		return nil, err
	}
	dst = scratch.Resize(dst, n)
	p.val.ValuesTo(dst, out, n)
	return dst, nil
}

// StateDim is the recurrent state of one env (0: a stateless policy).
func (p *streamPolicy) StateDim() int { return p.st.sd }

// StateTo appends the envs' states to dst[:0].
func (p *streamPolicy) StateTo(dst []float32, n int) []float32 {
	return append(dst[:0], p.st.state[:n*p.st.sd]...)
}

// EnvValue is V(obs) of env i from its state (a truncated episode's
// bootstrap). A failed request gives 0 here and fails the next Act or
// Values, so the segment is not pushed.
func (p *streamPolicy) EnvValue(i int, obs []float32) float32 {
	var v [1]float32
	if _, err := p.values(v[:], obs, i, 1); err != nil {
		if p.err == nil {
			p.err = err
		}
		return 0
	}
	return v[0]
}

// ResetEnv zeroes env i's state: its episode ended.
func (p *streamPolicy) ResetEnv(i int) {
	clear(p.st.state[i*p.st.sd : (i+1)*p.st.sd])
}

// timedVector adds the time of its env steps (automatic resets included)
// to the worker's timing.
type timedVector struct {
	env.Vector
	ph *phase
	tm *StepTiming
}

func (v timedVector) Step(actions []float32) (*env.Batch, error) {
	v.ph.add(nil)
	b, err := v.Vector.Step(actions)
	v.ph.add(&v.tm.Env)
	return b, err
}
