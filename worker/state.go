package worker

import (
	"fmt"

	"herd/algo"
	"herd/internal/scratch"
)

// carrier runs a policy on rows that carry their env's recurrent state
// (algo.StatefulPolicy): an input row is [observation | state] and an
// output row [outputs | the state after the step]. Policy workers and
// inline copies run the network through it, so the network keeps no state
// between calls: any policy worker can answer any request, a retried
// request is answered from the state it carries, and a policy worker that
// restarts loses nothing. The env worker keeps the states (streamPolicy).
// A stateless policy's rows pass through unchanged.
type carrier struct {
	pol             algo.PolicyNet
	sp              algo.StatefulPolicy // nil when stateless
	sd              int
	obs, state, out []float32
}

func newCarrier(pol algo.PolicyNet) *carrier {
	c := &carrier{pol: pol}
	if sp, ok := pol.(algo.StatefulPolicy); ok && sp.StateDim() > 0 {
		c.sp, c.sd = sp, sp.StateDim()
	}
	return c
}

// stateDim is the state per env that the pieces' policy carries (0:
// none).
func stateDim(pieces *algo.Pieces) (int, error) {
	if pieces == nil || pieces.NewPolicy == nil {
		return 0, nil
	}
	p, err := pieces.NewPolicy()
	if err != nil {
		return 0, err
	}
	return newCarrier(p).sd, nil
}

// outDim is the width of an output row.
func (c *carrier) outDim() int { return c.pol.OutDim() + c.sd }

// forward writes the output rows for rows input rows into dst (grown as
// needed) and returns it.
func (c *carrier) forward(dst, in []float32, rows int) []float32 {
	dst = scratch.Resize(dst, rows*c.outDim())
	if c.sd == 0 || rows == 0 {
		return c.pol.ForwardTo(dst, in, rows)
	}
	sd, w := c.sd, c.pol.OutDim()
	iw := len(in) / rows
	od := iw - sd
	c.obs, c.state = scratch.Resize(c.obs, rows*od), scratch.Resize(c.state, rows*sd)
	for i := range rows {
		copy(c.obs[i*od:(i+1)*od], in[i*iw:])
		copy(c.state[i*sd:(i+1)*sd], in[i*iw+od:])
	}
	c.sp.SetState(c.state, rows)
	c.out = c.pol.ForwardTo(scratch.Resize(c.out, rows*w), c.obs, rows)
	c.state = c.sp.StateTo(c.state, rows)
	for i := range rows {
		copy(dst[i*(w+sd):], c.out[i*w:(i+1)*w])
		copy(dst[i*(w+sd)+w:(i+1)*(w+sd)], c.state[i*sd:])
	}
	return dst
}

// envStates are an env worker's recurrent states, one row of sd per env,
// which travel with its inference requests (carrier): rows in takes
// [observation | state] rows of envs lo …, and split takes the replies
// apart, keeping the states of a step taken (Act) and dropping those of a
// value read (the bootstraps, which do not advance an env's state).
type envStates struct {
	sd    int
	state []float32
	outs  []float32 // the outputs of the last split, rows × out width
}

// in returns obs (rows × observation size) with the states of envs lo …
// lo+rows−1 beside, in buf (grown as needed); obs itself when stateless.
func (s *envStates) in(buf *[]float32, obs []float32, lo, rows int) []float32 {
	if s.sd == 0 || rows == 0 {
		return obs
	}
	sd, od := s.sd, len(obs)/rows
	b := scratch.Resize(*buf, rows*(od+sd))
	for i := range rows {
		copy(b[i*(od+sd):], obs[i*od:(i+1)*od])
		copy(b[i*(od+sd)+od:(i+1)*(od+sd)], s.state[(lo+i)*sd:])
	}
	*buf = b
	return b
}

// split returns the outputs of rows reply rows for envs lo …, keeping
// their states when keep; the reply itself when stateless.
func (s *envStates) split(wide []float32, lo, rows int, keep bool) ([]float32, error) {
	if s.sd == 0 || rows == 0 {
		return wide, nil
	}
	sd := s.sd
	if len(wide)%rows != 0 || len(wide)/rows <= sd {
		return nil, fmt.Errorf("worker: a reply of %d values for %d rows of outputs and a state of %d", len(wide), rows, sd)
	}
	ww := len(wide) / rows
	w := ww - sd
	s.outs = scratch.Resize(s.outs, rows*w)
	for i := range rows {
		copy(s.outs[i*w:(i+1)*w], wide[i*ww:])
		if keep {
			copy(s.state[(lo+i)*sd:(lo+i+1)*sd], wide[i*ww+w:(i+1)*ww])
		}
	}
	return s.outs, nil
}
