package onpolicy

import (
	"fmt"
	"math"
	"math/rand/v2"

	"herd/nn"
)

// RecurrentLSTM is the one recurrent core the agents build (AgentConfig.
// Recurrent): a one-layer nn.LSTM.
const RecurrentLSTM = "lstm"

// recBody is a recurrent actor or critic, CleanRL ppo_atari_lstm's network
// on flat observations: an MLP encoder (AgentConfig.Hidden, every layer
// activated, none when Hidden is empty), a one-layer LSTM of Recurrent
// units, and a linear head. Its state per sequence is (h, c), 2·H values.
//
// A body is a function of a whole sequence, not of one row: seq sets the
// sequences the next Forward runs (T steps of B sequences, time-major rows
// t·B + b, from the initial states and with the episode starts), and
// Forward's batch must be T·B. The policy acts with T = 1 and keeps the
// final state; the learner re-runs each env's segment from the state
// stored at its start.
type recBody struct {
	enc    *nn.MLP // nil: the LSTM reads the observation
	lstm   *nn.LSTM
	head   *nn.MLP
	hidden int
	params []*nn.Param

	t, b   int
	h0, c0 []float32 // B × H each
	starts []bool
	hs     []float32 // the LSTM's outputs of the last Forward
}

// newRecBody builds in → encoder → LSTM(hidden) → out, drawing from r in
// that order. With ortho the encoder and head are initialised as CleanRL's
// layer_init (gains √2 and outGain, biases 0) and the LSTM as
// ppo_atari_lstm's (orthogonal weights with gain 1, biases 0); otherwise
// PyTorch's defaults.
func newRecBody(in int, enc []int, hidden, out int, act nn.Activation, ortho bool, outGain float64, gemm nn.Gemm, r *rand.Rand) (*recBody, error) {
	b := &recBody{hidden: hidden}
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
	l, err := nn.NewLSTM("lstm.", lstmIn, hidden, gemm, r)
	if err != nil {
		return nil, err
	}
	if ortho {
		for _, p := range l.Params() {
			if len(p.Shape) == 2 {
				nn.OrthogonalInit(p.Value, p.Shape[0], p.Shape[1], 1, r)
			} else {
				clear(p.Value)
			}
		}
	}
	b.lstm = l
	b.params = append(b.params, l.Params()...)
	init := nn.Init{}
	if ortho {
		init = nn.Init{Kind: nn.InitOrthogonal, OutGain: outGain}
	}
	h, err := nn.NewMLP(nn.MLPConfig{In: hidden, Out: out, OutAct: nn.Identity, Init: init, Gemm: gemm}, r)
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

// stateDim is the state of one sequence: h then c.
func (b *recBody) stateDim() int { return 2 * b.hidden }

// seq sets the sequences of the next Forward: t steps of nb sequences
// from state (nb rows of stride values, the body's h then c from column
// off), with starts[t·nb+j] true where sequence j begins an episode at
// step t (nil: none).
func (b *recBody) seq(t, nb int, state []float32, stride, off int, starts []bool) {
	h := b.hidden
	b.t, b.b, b.starts = t, nb, starts
	b.h0, b.c0 = grow(b.h0, nb*h), grow(b.c0, nb*h)
	for j := range nb {
		row := state[j*stride+off : j*stride+off+2*h]
		copy(b.h0[j*h:(j+1)*h], row[:h])
		copy(b.c0[j*h:(j+1)*h], row[h:])
	}
}

// finalTo writes each sequence's state after the last Forward into dst
// (nb rows of stride values, from column off).
func (b *recBody) finalTo(dst []float32, stride, off int) {
	h := b.hidden
	hT, cT := b.lstm.FinalState()
	for j := range b.b {
		row := dst[j*stride+off : j*stride+off+2*h]
		copy(row[:h], hT[j*h:(j+1)*h])
		copy(row[h:], cT[j*h:(j+1)*h])
	}
}

func (b *recBody) Params() []*nn.Param { return b.params }

func (b *recBody) Reserve(int) {}

func (b *recBody) Forward(x []float32, batch int) []float32 {
	if batch != b.t*b.b {
		panic(fmt.Sprintf("onpolicy: recurrent forward of %d rows for sequences of %d steps × %d", batch, b.t, b.b))
	}
	if b.enc != nil {
		x = b.enc.Forward(x, batch)
	}
	b.hs = b.lstm.Forward(x, b.t, b.b, b.h0, b.c0, b.starts)
	return b.head.Forward(b.hs, batch)
}

func (b *recBody) ForwardTo(dst, x []float32, batch int) []float32 {
	return dst[:copy(dst, b.Forward(x, batch))]
}

// Backward back-propagates through the head, the whole sequence (BPTT
// over the segment, cut at episode starts) and the encoder.
func (b *recBody) Backward(dOut []float32) {
	dh := b.head.Backward(dOut)
	dx := b.lstm.Backward(dh)
	if b.enc != nil {
		b.enc.Backward(dx)
	}
}
