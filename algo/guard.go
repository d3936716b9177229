package algo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"herd/nn"
)

// ErrDiverged marks a run stopped because a loss, a gradient or a
// parameter became NaN or infinite (errors.Is(err, ErrDiverged)).
var ErrDiverged = errors.New("algo: training diverged")

// DivergedError says where a run diverged: the global step, the quantity
// (a scalar name such as "losses/td_loss", or "parameter actor.0.weight",
// "gradient of 0.bias", "episode return") and its value.
type DivergedError struct {
	Step     int64
	Quantity string
	Value    float64
	// KeptStep is the step of the parameters that were kept (the last
	// check at which every parameter was finite; 0 = the initial ones), or
	// -1 when the model's parameters were never seen (it does not
	// implement ParamModel).
	KeptStep int64
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("training diverged at step %d: %s is %v", e.Step, e.Quantity, e.Value)
}

func (e *DivergedError) Unwrap() error { return ErrDiverged }

// ParamModel is a Model whose parameters the divergence guard can check and
// roll back: Params returns the live parameters that Save writes (values
// and the gradients of the last update).
//
// A ParamModel that is also a sync.Locker is one whose parameters another
// goroutine updates while the run logs: the guard reads them only while it
// holds that lock.
type ParamModel interface {
	Model
	Params() []*nn.Param
}

// undefinedOK lists scalars for which NaN means "undefined", not divergence:
// explained variance is NaN when the returns of a rollout have no variance.
var undefinedOK = map[string]bool{"losses/explained_variance": true}

// ownName is a scalar's name without the policy/<id>/ prefix of a run with
// several policies (PolicyScalars).
func ownName(name string) string {
	if rest, ok := strings.CutPrefix(name, "policy/"); ok {
		if _, own, ok := strings.Cut(rest, "/"); ok {
			return own
		}
	}
	return name
}

// guard is the Logger that TrainRun hands to Train: it forwards every call
// to the recorder and stops the run (by cancelling its context with a
// *DivergedError as the cause) at the first non-finite loss or episode
// return, and at each metrics row at the first non-finite parameter or
// gradient of the tracked model. At each row where all parameters are
// finite it copies them, so that a diverged run saves the last finite
// weights instead of NaNs.
//
// Cost: one comparison per Scalar call; per row, one pass over the
// parameters (check and copy), which is small next to the LogEvery steps of
// training between rows.
type guard struct {
	Logger
	cancel   context.CancelCauseFunc
	every    int64
	step     int64
	next     int64
	params   []*nn.Param
	lock     sync.Locker // nil: the parameters change only on the logging goroutine
	kept     [][]float32
	keptStep int64
	err      *DivergedError
	// writeErr: the metrics could not be written (the run was stopped).
	writeErr error
	// pending: err came from a Scalar, which algorithms log before the
	// Step call of the same update; that Step gives err its step.
	pending bool
}

func newGuard(l Logger, cancel context.CancelCauseFunc, logEvery int64) *guard {
	if logEvery <= 0 {
		logEvery = 1000
	}
	return &guard{Logger: l, cancel: cancel, every: logEvery, next: logEvery, keptStep: -1}
}

// track starts watching m's parameters (if it exposes them) and keeps a
// copy of them as they are now.
func (g *guard) track(m Model) {
	pm, ok := m.(ParamModel)
	if !ok {
		return
	}
	g.params = pm.Params()
	g.lock, _ = m.(sync.Locker)
	g.kept = make([][]float32, len(g.params))
	for i, p := range g.params {
		g.kept[i] = make([]float32, len(p.Value))
	}
	g.checkParams()
}

func (g *guard) diverge(quantity string, v float64) {
	if g.err != nil {
		return
	}
	g.err = &DivergedError{Step: g.step, Quantity: quantity, Value: v, KeptStep: g.keptStep}
	g.cancel(g.err)
}

func (g *guard) Episode(step int64, ret float64, length int) {
	g.Logger.Episode(step, ret, length)
	if math.IsNaN(ret) || math.IsInf(ret, 0) {
		g.step = max(g.step, step)
		g.diverge("episode return", ret)
	}
}

func (g *guard) Scalar(name string, v float64) {
	g.Logger.Scalar(name, v)
	if g.err == nil && (math.IsInf(v, 0) || math.IsNaN(v) && !undefinedOK[ownName(name)]) {
		g.diverge(name, v)
		g.pending = true
	}
}

func (g *guard) Step(step int64) {
	g.step = step
	if g.pending {
		g.err.Step, g.pending = step, false
	}
	g.Logger.Step(step)
	if e, ok := g.Logger.(interface{ Err() error }); ok && g.writeErr == nil {
		if err := e.Err(); err != nil {
			// The run's metrics can no longer be written: stop now, not
			// at the end.
			g.writeErr = err
			g.cancel(err)
		}
	}
	if step >= g.next {
		g.next = (step/g.every + 1) * g.every
		g.checkParams()
	}
}

// checkParams checks every tracked value and gradient, and keeps a copy of
// the values when all are finite.
func (g *guard) checkParams() {
	if g.err != nil || g.params == nil {
		return
	}
	if g.lock != nil {
		g.lock.Lock()
		defer g.lock.Unlock()
	}
	for _, p := range g.params {
		if i := nonFinite(p.Value); i >= 0 {
			g.diverge("parameter "+p.Name, float64(p.Value[i]))
			return
		}
		if i := nonFinite(p.Grad); i >= 0 {
			g.diverge("gradient of "+p.Name, float64(p.Grad[i]))
			return
		}
	}
	for i, p := range g.params {
		copy(g.kept[i], p.Value)
	}
	g.keptStep = g.step
}

// restore puts the last finite parameters back into the tracked model and
// reports whether it could.
func (g *guard) restore() bool {
	if g.params == nil || g.keptStep < 0 {
		return false
	}
	for i, p := range g.params {
		copy(p.Value, g.kept[i])
	}
	return true
}

// nonFinite returns the index of the first NaN or ±Inf in xs, or -1.
func nonFinite(xs []float32) int {
	for i, x := range xs {
		if x-x != 0 { // NaN and ±Inf alone give a non-zero (NaN) difference
			return i
		}
	}
	return -1
}
