package nn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"herd/internal/rng"
	"herd/nn/internal/kernel"
)

// BenchRow is one measurement of `herd bench nn`: the JSON form is
// {"net","batch","op","backend","ns_per_op"}.
type BenchRow struct {
	Net     string `json:"net"`
	Batch   int    `json:"batch"`
	Op      string `json:"op"`
	Backend string `json:"backend"`
	// Kernels are the kernels the backend ran: Kernels() for "native",
	// "portable" for "go", the backend's name for the others.
	Kernels string  `json:"kernels"`
	NsPerOp float64 `json:"ns_per_op"`
	// GFLOPs is the rate of the op's matrix products: 2·batch·in·out per
	// Linear layer forward, three times that for the training ops (the
	// forward, dW and dX products); for "lstm" and "gru" the gate products
	// 2·steps·batch·gates·hidden·(in + hidden), three times that for
	// training (element-wise gate work not counted); 0 for the conv presets.
	GFLOPs float64 `json:"gflops"`
	// PeakGFLOPs is the machine's float32 peak for the process's threads:
	// GOMAXPROCS × one core's measured FMA throughput (kernel.PeakFLOPs:
	// clock × FMA units × lanes × 2, timed on a loop of independent FMAs),
	// whichever path runs; 0 where the build or CPU has no assembly.
	PeakGFLOPs float64 `json:"peak_gflops"`
}

// kernelsOf names the kernels backend runs (BenchRow.Kernels).
func kernelsOf(backend string) string {
	switch backend {
	case "native", "":
		return Kernels()
	case "go":
		return "portable"
	}
	return backend
}

// Benchmark operations.
const (
	OpForward    = "forward"      // MLP.Forward
	OpFwdBwd     = "fwd_bwd"      // Forward, ZeroGrad, Backward
	OpFwdBwdAdam = "fwd_bwd_adam" // Forward, ZeroGrad, Backward, Adam.Step
)

// BenchOptions selects what BenchMLP measures. Zero fields take defaults.
type BenchOptions struct {
	// Nets are hidden-layer specs like "64-64", or conv presets
	// "conv-minatar" (4×10×10 frames), "conv-nature" (4×84×84; see
	// ConvPreset: the convolutions with ReLU between them, no heads) and
	// "conv-impala" (ImpalaStages on 4×10×10 frames), or "lstm" and "gru"
	// (one layer, 64 inputs, 128 hidden, over RecurrentBenchSteps steps of
	// RecurrentBenchSeqs sequences, whatever Batches says; backward through
	// every step); default {"64-64", "256-256"}.
	Nets []string
	// In and Out are the input and output widths; default 4 and 2
	// (CartPole-sized).
	In, Out int
	// Batches; default {1, 32, 256, 1024}.
	Batches []int
	// Ops; default all three.
	Ops []string
	// Backends by GemmByName name; default all available in this build
	// except the slow portable "go" one.
	Backends []string
	// Stat picks the statistic over the repeats: "min" (default) or
	// "median". On a shared machine the minimum of many short interleaved
	// runs is the best estimate of the uncontended time.
	Stat string
	// Act is the hidden activation; default ReLU.
	Act Activation
	// MinTime is the time each timing run lasts; default 30 ms.
	MinTime time.Duration
	// Repeats is the number of timing runs per case; default 15.
	Repeats int
	// Clock is what a timing run measures: "wall" (default) or "cpu", the
	// CPU time of all of the process's threads. On a machine whose cores
	// other processes share, CPU time leaves out the time they hold the
	// cores (not their contention for caches or a core's other hardware
	// thread).
	Clock string
}

// ParseNet parses a hidden-layer spec such as "64-64" or "256-256-256".
func ParseNet(spec string) ([]int, error) {
	var hidden []int
	for _, f := range strings.Split(spec, "-") {
		h, err := strconv.Atoi(f)
		if err != nil || h <= 0 {
			return nil, fmt.Errorf("%w: net spec %q: want sizes like 64-64", ErrConfig, spec)
		}
		hidden = append(hidden, h)
	}
	return hidden, nil
}

// NewBenchOp builds a network and returns a closure performing op once on
// a fixed random batch; the closure does not allocate after its first call.
func NewBenchOp(g Gemm, hidden []int, in, out, batch int, op string) (func(), error) {
	return NewBenchOpAct(g, hidden, in, out, batch, op, ReLU)
}

// NewBenchOpAct is NewBenchOp with a chosen hidden activation.
func NewBenchOpAct(g Gemm, hidden []int, in, out, batch int, op string, act Activation) (func(), error) {
	if batch <= 0 {
		return nil, fmt.Errorf("%w: batch %d", ErrConfig, batch)
	}
	r := rng.New(1, "nn/bench", 0)
	m, err := NewMLP(MLPConfig{In: in, Hidden: hidden, Out: out, Act: act, Gemm: g}, r)
	if err != nil {
		return nil, err
	}
	m.Reserve(batch)
	x := make([]float32, batch*in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	dOut := make([]float32, batch*out)
	for i := range dOut {
		dOut[i] = float32(r.NormFloat64()) / float32(batch)
	}
	opt, err := NewAdam(AdamConfig{LR: 1e-4})
	if err != nil {
		return nil, err
	}
	switch op {
	case OpForward:
		return func() { m.Forward(x, batch) }, nil
	case OpFwdBwd:
		return func() {
			m.Forward(x, batch)
			m.ZeroGrad()
			m.Backward(dOut)
		}, nil
	case OpFwdBwdAdam:
		return func() {
			m.Forward(x, batch)
			m.ZeroGrad()
			m.Backward(dOut)
			opt.Step(m.Params())
		}, nil
	}
	return nil, fmt.Errorf("%w: unknown op %q (want %s, %s or %s)", ErrConfig, op, OpForward, OpFwdBwd, OpFwdBwdAdam)
}

// WallClock is the time since the first call, the clock TimeOps takes by
// default.
func WallClock() func() time.Duration {
	t0 := time.Now()
	return func() time.Duration { return time.Since(t0) }
}

// TimeOps times every closure in fs on clock (WallClock or the process's
// CPU time) and returns, for each, the minimum
// (useMin) or the median over repeats of its mean time per call. The closures are timed in turn
// within each repeat (round robin), so on a shared, noisy machine they see
// the same conditions and their ratios are meaningful. A cancelled ctx
// stops it within one call of a closure, with ctx's error.
func TimeOps(ctx context.Context, clock func() time.Duration, fs []func(), minTime time.Duration, repeats int, useMin bool) ([]float64, error) {
	// The timed loops poll an atomic flag (a load per call) rather than
	// ctx.Err(), whose lock would weigh on calls of a microsecond.
	var stop atomic.Bool
	defer context.AfterFunc(ctx, func() { stop.Store(true) })()
	iters := make([]int, len(fs))
	for i, f := range fs {
		f() // warm-up: sizes workspaces and caches
		n := 1
		for {
			start := clock()
			for k := 0; k < n && !stop.Load(); k++ {
				f()
			}
			if stop.Load() {
				return nil, ctx.Err()
			}
			el := clock() - start
			if el >= minTime/8 || n >= 1<<30 {
				n = max(1, int(float64(n)*float64(minTime)/float64(max(el, time.Microsecond))))
				break
			}
			n *= 4
		}
		iters[i] = n
	}
	res := make([][]float64, len(fs))
	for rep := 0; rep < repeats; rep++ {
		for i, f := range fs {
			start := clock()
			for k := 0; k < iters[i] && !stop.Load(); k++ {
				f()
			}
			if stop.Load() {
				return nil, ctx.Err()
			}
			res[i] = append(res[i], float64((clock()-start).Nanoseconds())/float64(iters[i]))
		}
	}
	med := make([]float64, len(fs))
	for i := range res {
		sort.Float64s(res[i])
		med[i] = res[i][len(res[i])/2]
		if useMin {
			med[i] = res[i][0]
		}
	}
	return med, nil
}

// BenchMLP runs the benchmark grid and returns one row per (net, batch,
// op, backend). Forward is measured at every batch; the training ops only
// at batches ≥ 32 (learners do not train at batch 1) unless a single batch
// is requested. Backends are timed round robin (see TimeOps).
func BenchMLP(ctx context.Context, o BenchOptions) ([]BenchRow, error) {
	if len(o.Nets) == 0 {
		o.Nets = []string{"64-64", "256-256"}
	}
	if o.In == 0 {
		o.In = 4
	}
	if o.Out == 0 {
		o.Out = 2
	}
	if len(o.Batches) == 0 {
		o.Batches = []int{1, 32, 256, 1024}
	}
	if len(o.Ops) == 0 {
		o.Ops = []string{OpForward, OpFwdBwd, OpFwdBwdAdam}
	}
	if len(o.Backends) == 0 {
		for _, be := range GemmBackends() {
			if be != "go" {
				o.Backends = append(o.Backends, be)
			}
		}
	}
	if o.MinTime <= 0 {
		o.MinTime = 30 * time.Millisecond
	}
	switch o.Stat {
	case "", "min":
		o.Stat = "min"
	case "median":
	default:
		return nil, fmt.Errorf("%w: bench stat %q (want min or median)", ErrConfig, o.Stat)
	}
	if o.Repeats <= 0 {
		o.Repeats = 15
	}
	var clock func() time.Duration
	switch o.Clock {
	case "", "wall":
		clock = WallClock()
	case "cpu":
		var err error
		if clock, err = processCPUClock(); err != nil {
			return nil, fmt.Errorf("%w: bench clock cpu: %w", ErrUnavailable, err)
		}
	default:
		return nil, fmt.Errorf("%w: bench clock %q (want wall or cpu)", ErrConfig, o.Clock)
	}
	gemms := make([]Gemm, len(o.Backends))
	for i, be := range o.Backends {
		g, err := GemmByName(be)
		if err != nil {
			return nil, err
		}
		gemms[i] = g
	}
	peak := kernel.PeakFLOPs() * float64(runtime.GOMAXPROCS(0)) / 1e9
	var rows []BenchRow
	for _, spec := range o.Nets {
		var newOp func(g Gemm, batch int, op string) (func(), error)
		macs := 0 // multiply-adds per sample of one forward pass

		batches := o.Batches
		if gates := recurrentGates(spec); gates > 0 {
			batches = []int{RecurrentBenchSeqs}
			macs = RecurrentBenchSteps * gates * recurrentBenchH * (recurrentBenchIn + recurrentBenchH)
			newOp = func(g Gemm, _ int, op string) (func(), error) { return newRecurrentBenchOp(g, gates, op) }
		} else if preset, ok := strings.CutPrefix(spec, "conv-"); ok {
			c, h, w := 4, 10, 10
			if preset == "nature" {
				h, w = 84, 84
			}
			if _, err := convBenchLayers(DefaultGemm(), preset, c, h, w, rng.New(1, "nn/bench", 0)); err != nil {
				return nil, err
			}
			newOp = func(g Gemm, batch int, op string) (func(), error) {
				return newConvBenchOp(g, preset, c, h, w, batch, op)
			}
		} else {
			hidden, err := ParseNet(spec)
			if err != nil {
				return nil, err
			}
			widths := append(append([]int{o.In}, hidden...), o.Out)
			for i := 1; i < len(widths); i++ {
				macs += widths[i-1] * widths[i]
			}
			newOp = func(g Gemm, batch int, op string) (func(), error) {
				return NewBenchOpAct(g, hidden, o.In, o.Out, batch, op, o.Act)
			}
		}
		for _, batch := range batches {
			for _, op := range o.Ops {
				if op != OpForward && batch < 32 && len(batches) > 1 {
					continue
				}
				fs := make([]func(), len(gemms))
				for i, g := range gemms {
					var err error
					if fs[i], err = newOp(g, batch, op); err != nil {
						return nil, err
					}
				}
				ns, err := TimeOps(ctx, clock, fs, o.MinTime, o.Repeats, o.Stat == "min")
				if err != nil {
					return rows, err
				}
				flops := 2 * float64(batch*macs)
				if op != OpForward {
					flops *= 3
				}
				for i, be := range o.Backends {
					rows = append(rows, BenchRow{Net: spec, Batch: batch, Op: op, Backend: be, Kernels: kernelsOf(be), NsPerOp: ns[i],
						GFLOPs: flops / ns[i], PeakGFLOPs: peak})
				}
			}
		}
	}
	return rows, nil
}

// convBenchLayers builds a preset's encoder for c×h×w images: the
// convolutions of ConvPreset with ReLU between them, or ImpalaStages for
// "impala"; no heads.
func convBenchLayers(g Gemm, preset string, c, h, w int, r *rand.Rand) ([]encLayer, error) {
	var layers []encLayer
	if preset == "impala" {
		stages, err := ImpalaStages(c, h, w)
		if err != nil {
			return nil, err
		}
		for i, st := range stages {
			l, err := newStageLayer(fmt.Sprintf("%d.", i), st, g, r)
			if err != nil {
				return nil, err
			}
			layers = append(layers, l)
		}
		return layers, nil
	}
	cfgs, err := ConvPreset(preset, c, h, w)
	if err != nil {
		return nil, err
	}
	for i, cfg := range cfgs {
		cv, err := NewConv2d(fmt.Sprintf("%d.", 2*i), cfg, g, r)
		if err != nil {
			return nil, err
		}
		// A ReLU between the convolutions, none after the last.
		layers = append(layers, &convLayer{Conv2d: cv, relu: i < len(cfgs)-1})
	}
	return layers, nil
}

// newConvBenchOp times a preset's encoder (convBenchLayers) at a batch.
func newConvBenchOp(g Gemm, preset string, c, h, w, batch int, op string) (func(), error) {
	if batch <= 0 {
		return nil, fmt.Errorf("%w: batch %d", ErrConfig, batch)
	}
	r := rng.New(1, "nn/bench", 0)
	layers, err := convBenchLayers(g, preset, c, h, w, r)
	if err != nil {
		return nil, err
	}
	var params []*Param
	for _, l := range layers {
		params = append(params, l.params()...)
	}
	x := make([]float32, batch*layers[0].in())
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	dOut := make([]float32, batch*layers[len(layers)-1].out())
	for i := range dOut {
		dOut[i] = float32(r.NormFloat64()) / float32(batch)
	}
	forward := func() {
		in := x
		for _, l := range layers {
			in = l.forward(in, batch)
		}
	}
	backward := func() {
		ZeroGrads(params)
		d := dOut
		for i := len(layers) - 1; i >= 0; i-- {
			// No gradient for the images (a network reading
			// observations does not need it, nor does PyTorch compute
			// one for an input without requires_grad).
			d = layers[i].backward(d, i > 0)
		}
	}
	return layerBenchOp(op, forward, backward, params)
}

// layerBenchOp is op as one closure over a network's forward pass, its
// backward pass (which zeroes the gradients first) and its parameters.
func layerBenchOp(op string, forward, backward func(), params []*Param) (func(), error) {
	opt, err := NewAdam(AdamConfig{LR: 1e-4})
	if err != nil {
		return nil, err
	}
	switch op {
	case OpForward:
		return forward, nil
	case OpFwdBwd:
		return func() { forward(); backward() }, nil
	case OpFwdBwdAdam:
		return func() { forward(); backward(); opt.Step(params) }, nil
	}
	return nil, fmt.Errorf("%w: unknown op %q (want %s, %s or %s)", ErrConfig, op, OpForward, OpFwdBwd, OpFwdBwdAdam)
}

// The recurrent presets' shape: RecurrentBenchSteps steps of
// RecurrentBenchSeqs sequences, 64 inputs, 128 hidden units.
const (
	RecurrentBenchSteps = 128
	RecurrentBenchSeqs  = 8
	recurrentBenchIn    = 64
	recurrentBenchH     = 128
)

// recurrentGates is the gate count of a recurrent preset ("lstm" 4, "gru"
// 3), 0 for other specs.
func recurrentGates(spec string) int {
	switch spec {
	case "lstm":
		return 4
	case "gru":
		return 3
	}
	return 0
}

// newRecurrentBenchOp times an LSTM (gates 4) or GRU (gates 3) over a
// segment of RecurrentBenchSteps steps of RecurrentBenchSeqs sequences;
// the backward pass runs through every step (BPTT).
func newRecurrentBenchOp(g Gemm, gates int, op string) (func(), error) {
	const t, b, in, h = RecurrentBenchSteps, RecurrentBenchSeqs, recurrentBenchIn, recurrentBenchH
	r := rng.New(1, "nn/bench", 0)
	x := make([]float32, t*b*in)
	UniformInit(x, 1, r)
	dh := make([]float32, t*b*h)
	UniformInit(dh, 1, r)
	st := make([]float32, b*h)
	var forward, backward func()
	var params []*Param
	if gates == 4 {
		l, err := NewLSTM("", in, h, g, r)
		if err != nil {
			return nil, err
		}
		forward = func() { l.Forward(x, t, b, st, st, nil) }
		backward = func() { ZeroGrads(params); l.Backward(dh) }
		params = l.Params()
	} else {
		l, err := NewGRU("", in, h, g, r)
		if err != nil {
			return nil, err
		}
		forward = func() { l.Forward(x, t, b, st, nil) }
		backward = func() { ZeroGrads(params); l.Backward(dh) }
		params = l.Params()
	}
	return layerBenchOp(op, forward, backward, params)
}
