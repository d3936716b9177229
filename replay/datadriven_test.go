package replay

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"herd/internal/rng"
)

// TestDataDriven runs the scripts in testdata/ (pebble/raft style):
//
//	new capacity=4 [alpha=1] [beta=0.4] [lock=global] [stratified]
//	add n=3                      # transitions with the next ids
//	update idx=(0,1) gen=(1,1) prio=(2,3)
//	state                        # slot: id gen p^α
//	sample n=4 seed=1            # index gen prob weight id
//	beta b=0.5
//
// Rewrite the expected output with `go test -run DataDriven -rewrite`.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var p *Prioritized
		nextID := 0
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "new":
				cfg := Config{ObsSize: 1}
				d.ScanArgs(t, "capacity", &cfg.Capacity)
				d.MaybeScanArgs(t, "alpha", &cfg.Alpha)
				d.MaybeScanArgs(t, "beta", &cfg.Beta)
				cfg.Stratified = d.HasArg("stratified")
				var lock string
				if d.MaybeScanArgs(t, "lock", &lock) {
					l, err := ParseLocking(lock)
					if err != nil {
						return err.Error()
					}
					cfg.Locking = l
				}
				var err error
				if p, err = NewPrioritized(cfg); err != nil {
					return err.Error()
				}
				nextID = 0
				return "ok"
			case "add":
				var n int
				d.ScanArgs(t, "n", &n)
				if err := p.Add(makeBatch(n, 1, 1, nextID)); err != nil {
					return err.Error()
				}
				nextID += n
				return fmt.Sprintf("len %d", p.Len())
			case "update":
				idx := intsArg(t, d, "idx")
				gens := intsArg(t, d, "gen")
				gen := make([]uint64, len(gens))
				for i, g := range gens {
					gen[i] = uint64(g)
				}
				m, err := p.UpdatePriorities(idx, gen, floatsArg(t, d, "prio"))
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("applied %d", m)
			case "beta":
				var b float64
				d.ScanArgs(t, "b", &b)
				if err := p.SetBeta(b); err != nil {
					return err.Error()
				}
				return "ok"
			case "state":
				var sb strings.Builder
				for i := 0; i < p.Cap(); i++ {
					pr, g, _ := p.Priority(i)
					fmt.Fprintf(&sb, "slot %d: gen %d p^α %.4g\n", i, g, pr)
				}
				return sb.String()
			case "sample":
				var n int
				var seed uint64
				d.ScanArgs(t, "n", &n)
				d.ScanArgs(t, "seed", &seed)
				var s Sample
				if err := p.Sample(&s, n, rng.New(seed, "replay/datadriven", 0)); err != nil {
					return err.Error()
				}
				var sb strings.Builder
				for i := range s.Index {
					fmt.Fprintf(&sb, "slot %d gen %d id %d prob %.4f weight %.4f\n",
						s.Index[i], s.Gen[i], checkRow(&s, i, 1, 1), s.Prob[i], s.Weight[i])
				}
				return sb.String()
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

func argVals(t *testing.T, d *datadriven.TestData, key string) []string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return a.Vals
		}
	}
	t.Fatalf("%s: missing %s", d.Pos, key)
	return nil
}

func intsArg(t *testing.T, d *datadriven.TestData, key string) []int {
	var out []int
	for _, v := range argVals(t, d, key) {
		x, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			t.Fatalf("%s: %s: %v", d.Pos, key, err)
		}
		out = append(out, x)
	}
	return out
}

func floatsArg(t *testing.T, d *datadriven.TestData, key string) []float64 {
	var out []float64
	for _, v := range argVals(t, d, key) {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			t.Fatalf("%s: %s: %v", d.Pos, key, err)
		}
		out = append(out, x)
	}
	return out
}
