package onpolicy

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"herd/algo"
	"herd/internal/scratch"
	"herd/nn"
	"herd/sample"
)

// The recurrent cores the agents build (AgentConfig.Recurrent): a
// one-layer nn.LSTM or nn.GRU.
const (
	RecurrentLSTM = "lstm"
	RecurrentGRU  = "gru"
)

// core is a recurrent layer seen through one state vector per sequence:
// the LSTM's (h, c), the GRU's h.
type core interface {
	Params() []*nn.Param
	stateDim() int
	forward(x []float32, t, b int, s0 []float32, starts []bool) []float32
	finalTo(dst []float32, stride, off int)
	Backward(dh []float32) []float32
}

// lstmCore splits the state rows (h, c) into the LSTM's h0 and c0.
type lstmCore struct {
	*nn.LSTM
	h, b   int
	h0, c0 []float32
}

func (c *lstmCore) stateDim() int { return 2 * c.h }

func (c *lstmCore) forward(x []float32, t, b int, s0 []float32, starts []bool) []float32 {
	h := c.h
	c.b = b
	c.h0, c.c0 = scratch.Resize(c.h0, b*h), scratch.Resize(c.c0, b*h)
	for j := range b {
		copy(c.h0[j*h:(j+1)*h], s0[j*2*h:j*2*h+h])
		copy(c.c0[j*h:(j+1)*h], s0[j*2*h+h:(j+1)*2*h])
	}
	return c.Forward(x, t, b, c.h0, c.c0, starts)
}

func (c *lstmCore) finalTo(dst []float32, stride, off int) {
	h := c.h
	hT, cT := c.FinalState()
	for j := range c.b {
		row := dst[j*stride+off : j*stride+off+2*h]
		copy(row[:h], hT[j*h:(j+1)*h])
		copy(row[h:], cT[j*h:(j+1)*h])
	}
}

type gruCore struct {
	*nn.GRU
	h, b int
}

func (c *gruCore) stateDim() int { return c.h }

func (c *gruCore) forward(x []float32, t, b int, s0 []float32, starts []bool) []float32 {
	c.b = b
	return c.Forward(x, t, b, s0, starts)
}

func (c *gruCore) finalTo(dst []float32, stride, off int) {
	h := c.h
	hT := c.FinalState()
	for j := range c.b {
		copy(dst[j*stride+off:j*stride+off+h], hT[j*h:(j+1)*h])
	}
}

// recBody is a recurrent actor or critic, CleanRL ppo_atari_lstm's network
// on flat observations: an MLP encoder (AgentConfig.Hidden, every layer
// activated, none when Hidden is empty), a one-layer LSTM or GRU of
// Recurrent units, the RecurrentAfter layers (activated) and a linear
// head. Its state per sequence is the core's: (h, c), 2·H values, for an
// LSTM; h for a GRU.
//
// A body is a function of a whole sequence, not of one row: seq sets the
// sequences the next Forward runs (T steps of B sequences, time-major rows
// t·B + b, from the initial states and with the episode starts), and
// Forward's batch must be T·B. The policy acts with T = 1 and keeps the
// final state; the learner re-runs each env's segment from the state
// stored at its start.
type recBody struct {
	enc    *nn.MLP // nil: the core reads the observation
	core   core
	head   *nn.MLP // the after layers and the linear output
	params []*nn.Param

	t, b   int
	s0     []float32 // B × stateDim
	starts []bool
	hs     []float32 // the core's outputs of the last Forward
}

// newRecBody builds in → encoder → core(hidden) → after → out, drawing
// from r in that order. With ortho the encoder and head are initialised as
// CleanRL's layer_init (gains √2 and outGain, biases 0) and the core as
// ppo_atari_lstm's LSTM (orthogonal weights with gain 1, biases 0);
// otherwise PyTorch's defaults.
func newRecBody(in int, enc []int, kind string, hidden int, after []int, out int, act nn.Activation, ortho bool, outGain float64, gemm nn.Gemm, r *rand.Rand) (*recBody, error) {
	b := &recBody{}
	lstmIn := in
	if len(enc) > 0 {
		init := nn.Init{}
		if ortho {
			init = nn.Init{Kind: nn.InitOrthogonal, OutGain: math.Sqrt2}
		}
		m, err := nn.NewMLP(nn.MLPConfig{In: in, Hidden: enc[:len(enc)-1], Out: enc[len(enc)-1], Act: act, OutAct: act, Init: init, Gemm: gemm}, r)
		if err != nil {
			return nil, err
		}
		b.enc, lstmIn = m, enc[len(enc)-1]
		for _, p := range m.Params() {
			p.Name = "encoder." + p.Name
			b.params = append(b.params, p)
		}
	}
	switch kind {
	case RecurrentLSTM:
		l, err := nn.NewLSTM("lstm.", lstmIn, hidden, gemm, r)
		if err != nil {
			return nil, err
		}
		b.core = &lstmCore{LSTM: l, h: hidden}
	case RecurrentGRU:
		l, err := nn.NewGRU("gru.", lstmIn, hidden, gemm, r)
		if err != nil {
			return nil, err
		}
		b.core = &gruCore{GRU: l, h: hidden}
	default:
		return nil, fmt.Errorf("%w: recurrent core %q (want %q or %q)", nn.ErrConfig, kind, RecurrentLSTM, RecurrentGRU)
	}
	if ortho {
		for _, p := range b.core.Params() {
			if len(p.Shape) == 2 {
				nn.OrthogonalInit(p.Value, p.Shape[0], p.Shape[1], 1, r)
			} else {
				clear(p.Value)
			}
		}
	}
	b.params = append(b.params, b.core.Params()...)
	init := nn.Init{}
	if ortho {
		init = nn.Init{Kind: nn.InitOrthogonal, OutGain: outGain}
	}
	h, err := nn.NewMLP(nn.MLPConfig{In: hidden, Hidden: after, Out: out, Act: act, OutAct: nn.Identity, Init: init, Gemm: gemm}, r)
	if err != nil {
		return nil, err
	}
	b.head = h
	for _, p := range h.Params() {
		p.Name = "head." + p.Name
		b.params = append(b.params, p)
	}
	return b, nil
}

// stateDim is the state of one sequence (the core's).
func (b *recBody) stateDim() int { return b.core.stateDim() }

// seq sets the sequences of the next Forward: t steps of nb sequences
// from state (nb rows of stride values, the body's from column off), with
// starts[t·nb+j] true where sequence j begins an episode at step t (nil:
// none).
func (b *recBody) seq(t, nb int, state []float32, stride, off int, starts []bool) {
	sd := b.stateDim()
	b.t, b.b, b.starts = t, nb, starts
	b.s0 = scratch.Resize(b.s0, nb*sd)
	for j := range nb {
		copy(b.s0[j*sd:(j+1)*sd], state[j*stride+off:j*stride+off+sd])
	}
}

// finalTo writes each sequence's state after the last Forward into dst
// (nb rows of stride values, from column off).
func (b *recBody) finalTo(dst []float32, stride, off int) { b.core.finalTo(dst, stride, off) }

func (b *recBody) Params() []*nn.Param { return b.params }

func (b *recBody) Reserve(int) {}

func (b *recBody) Forward(x []float32, batch int) []float32 {
	if batch != b.t*b.b {
		panic(fmt.Sprintf("onpolicy: recurrent forward of %d rows for sequences of %d steps × %d", batch, b.t, b.b))
	}
	if b.enc != nil {
		x = b.enc.Forward(x, batch)
	}
	b.hs = b.core.forward(x, b.t, b.b, b.s0, b.starts)
	return b.head.Forward(b.hs, batch)
}

func (b *recBody) ForwardTo(dst, x []float32, batch int) []float32 {
	return dst[:copy(dst, b.Forward(x, batch))]
}

// Backward back-propagates through the head, the whole sequence (BPTT
// over the segment, cut at episode starts) and the encoder.
func (b *recBody) Backward(dOut []float32) {
	dh := b.head.Backward(dOut)
	dx := b.core.Backward(dh)
	if b.enc != nil {
		b.enc.Backward(dx)
	}
}

// RecurrentConfig is the network spec's recurrent core, the `recurrent:`
// section of PPO's and IMPALA's configs.
type RecurrentConfig struct {
	// Type is "lstm" or "gru" (PyTorch's nn.LSTM / nn.GRU, one layer), or
	// "" for none.
	Type string `yaml:"type"`
	// Hidden is the core's width; 0 means 128 (ppo_atari_lstm's).
	Hidden int `yaml:"hidden,omitempty"`
	// After are hidden layers (activated) between the core and each
	// network's linear head: SB3-contrib RecurrentPPO's net_arch, which
	// comes after its LSTM. Default none (ppo_atari_lstm's).
	After []int `yaml:"after,omitempty"`
}

// DefaultRecurrentHidden is the LSTM width of ppo_atari_lstm.py.
const DefaultRecurrentHidden = 128

// On reports whether the networks carry a state per env.
func (c RecurrentConfig) On() bool { return c.Type != "" }

// Check reports each problem with the section through bad (the
// algorithm's Validate collector).
func (c RecurrentConfig) Check(bad func(format string, a ...any)) {
	switch {
	case c.Type == "":
		if c.Hidden != 0 || len(c.After) > 0 {
			bad("recurrent.hidden or recurrent.after without recurrent.type")
		}
	case c.Type != RecurrentLSTM && c.Type != RecurrentGRU:
		bad("recurrent.type must be %q, %q or empty, got %q", RecurrentLSTM, RecurrentGRU, c.Type)
	case slices.ContainsFunc(c.After, func(w int) bool { return w < 1 }):
		bad("recurrent.after widths must be >= 1, got %v", c.After)
	case c.Hidden < 0:
		bad("recurrent.hidden must be >= 0 (0: %d), got %d", DefaultRecurrentHidden, c.Hidden)
	}
}

// Set fills a's recurrent core from the section.
func (c RecurrentConfig) Set(a *AgentConfig) {
	a.Recurrent, a.RecurrentHidden, a.RecurrentAfter = c.Type, cmp.Or(c.Hidden, DefaultRecurrentHidden), c.After
}

// Lacks is what algorithm algo's config with this core cannot do, and
// why (algo.Limiter): its policy is not a function of one observation, so
// it cannot act in a policy worker or a slot that neither keeps nor
// carries each env's state, and the several policies of a multiagent
// section are not given a state. 0 without a core.
func (c RecurrentConfig) Lacks(algoName string) (algo.Capability, string) {
	if !c.On() {
		return 0, ""
	}
	return algo.CanStatelessPolicy | algo.CanAgentRows,
		algoName + " with recurrent." + c.Type + ": the policy carries a hidden state per env, which the executor must keep or carry for each env (docs/guide/recurrent.md)"
}

// EpisodeStarts returns starts (grown) set where each env of seg begins an
// episode inside it: starts[t·N+e] = t > 0 and env e's step t−1 was done,
// the rows a learner re-running the segment's sequences
// (Agent.SetSequences) zeroes the state before. At t = 0 the stored state
// is already zero where the previous segment's last step was done.
func EpisodeStarts(starts []bool, seg *sample.Segment) []bool {
	n := seg.T * seg.N
	if cap(starts) < n {
		starts = make([]bool, n)
	}
	starts = starts[:n]
	for k := range starts {
		starts[k] = k >= seg.N && seg.Dones[k-seg.N] != 0
	}
	return starts
}

// CheckState reports a segment whose stored states an agent of state
// stateDim cannot re-run: not one row per env (none where stateDim is 0).
func CheckState(name string, seg *sample.Segment, stateDim int) error {
	if len(seg.State) != seg.N*stateDim {
		return fmt.Errorf("%w: %s: a learner of recurrent state %d needs each env's state at the segment's start: %d values for %d envs", sample.ErrShape, name, stateDim, len(seg.State), seg.N)
	}
	return nil
}
