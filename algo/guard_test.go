package algo

import (
	"context"
	"testing"

	"herd/nn"
)

type paramsOnly struct {
	scriptModel
	ps []*nn.Param
}

func (p *paramsOnly) Params() []*nn.Param { return p.ps }

// BenchmarkGuardRow is the divergence guard's cost per metrics row: one
// check and copy of every parameter (value and gradient) of a SAC-sized
// model (actor + two critics 256-256 on a 3-dim observation, ≈ 200k
// floats), plus the Scalar and Step calls of one update.
func BenchmarkGuardRow(b *testing.B) {
	var ps []*nn.Param
	for range 3 {
		ps = append(ps, nn.NewParam("w1", 256, 4), nn.NewParam("w2", 256, 256), nn.NewParam("w3", 1, 256))
	}
	g := newGuard(Discard(), func(error) {}, 1)
	g.track(&paramsOnly{ps: ps})
	b.SetBytes(int64(4 * 2 * nn.NumParams(ps)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		g.Scalar("losses/qf_loss", 1)
		g.Step(int64(i + 1)) // LogEvery 1: a row at every call
	}
	if g.err != nil {
		b.Fatal(g.err)
	}
}

// BenchmarkGuardUpdate is the cost on an update without a row: what every
// update of every algorithm pays.
func BenchmarkGuardUpdate(b *testing.B) {
	g := newGuard(Discard(), func(error) {}, 1<<62)
	g.track(&paramsOnly{ps: []*nn.Param{nn.NewParam("w", 64, 64)}})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		g.Scalar("losses/value_loss", 1)
		g.Scalar("losses/policy_loss", 1)
		g.Step(int64(i + 1))
	}
}

func TestGuardCancelsWithCause(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	g := newGuard(Discard(), cancel, 10)
	g.Step(5)
	g.Scalar("losses/explained_variance", nanF()) // undefined: fine
	if ctx.Err() != nil {
		t.Fatal("a NaN explained variance stopped the run")
	}
	g.Episode(7, nanF(), 3)
	de, ok := context.Cause(ctx).(*DivergedError)
	if !ok || de.Quantity != "episode return" || de.Step != 7 {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
}

func nanF() float64 { var z float64; return z / z }
