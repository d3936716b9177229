package classic

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"herd/env/internal/core"
)

// TestGoldenTransitions runs testdata/golden: hand-picked transitions
// (walls, clips, thresholds, wrapping, the two Acrobot variants) with their
// next state, reward and termination written out in full precision
// (shortest round-trip, like Python's repr). Every case is also checked
// against the 160-bit reference of reference_test.go to 1e-12 before it is
// printed, so rewriting the file (-rewrite) cannot record a wrong value.
//
//	step env=<name> state=(s0, s1, …) action=<a> [g=<gravity>] [variant=nips]
func TestGoldenTransitions(t *testing.T) {
	datadriven.RunTest(t, "testdata/golden", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "step" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		var name string
		var action float64
		d.ScanArgs(t, "env", &name)
		d.ScanArgs(t, "action", &action)
		arg, _ := d.Arg("state")
		s := make([]float64, len(arg.Vals))
		for i := range s {
			arg.Scan(t, i, &s[i])
		}
		g := 10.0
		d.MaybeScanArgs(t, "g", &g)
		variant := "book"
		d.MaybeScanArgs(t, "variant", &variant)

		var e interface {
			core.Env
			core.Stater
		}
		var want []float64
		var wantR float64
		var wantTerm bool
		switch name {
		case "CartPole":
			e = NewCartPole(CartPoleConfig{})
			ns, term := refCartPole([4]float64(s), int(action))
			want, wantR, wantTerm = ns[:], 1, term
		case "Pendulum":
			e = NewPendulum(PendulumConfig{G: g})
			ns, r := refPendulum([2]float64(s), float64(float32(action)), g)
			want, wantR = ns[:], r
		case "MountainCar":
			e = NewMountainCar(MountainCarConfig{})
			ns, term := refMountainCar([2]float64(s), int(action))
			want, wantR, wantTerm = ns[:], -1, term
		case "MountainCarContinuous":
			e = NewMountainCarContinuous(MountainCarConfig{})
			ns, r, term := refMountainCarContinuous([2]float64(s), float64(float32(action)))
			want, wantR, wantTerm = ns[:], r, term
		case "Acrobot":
			a, err := NewAcrobot(AcrobotConfig{BookOrNips: variant})
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			e = a
			ns, term := refAcrobot([4]float64(s), int(action), variant == "nips")
			want, wantTerm = ns[:], term
			wantR = -1
			if term {
				wantR = 0
			}
		default:
			d.Fatalf(t, "unknown env %q", name)
		}
		if _, err := e.SetState(s); err != nil {
			d.Fatalf(t, "%v", err)
		}
		obs, r, term, _, _, err := e.Step([]float32{float32(action)})
		if err != nil {
			return "error: " + err.Error()
		}
		got := e.StateTo(nil)
		for i := range got {
			if far(got[i], want[i], tol) {
				d.Fatalf(t, "state[%d] = %.17g, reference %.17g", i, got[i], want[i])
			}
		}
		if far(r, wantR, tol) || term != wantTerm {
			d.Fatalf(t, "reward %.17g terminated %v, reference %.17g %v", r, term, wantR, wantTerm)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "next state = %s\n", join64(got))
		fmt.Fprintf(&b, "obs        = %s\n", join32(obs))
		fmt.Fprintf(&b, "reward     = %s\n", strconv.FormatFloat(r, 'g', -1, 64))
		fmt.Fprintf(&b, "terminated = %v\n", term)
		return b.String()
	})
}

func join64(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func join32(xs []float32) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
