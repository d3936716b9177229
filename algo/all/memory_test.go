package all

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/sysmem"
)

// TestMemoryCountsEveryNetwork: the estimate counts every network an
// algorithm's learner holds — actor, critics, twins and targets — with
// values, gradients and optimizer moments, and a run whose networks
// cannot fit is refused naming the key that sizes them, before anything
// is allocated or written.
func TestMemoryCountsEveryNetwork(t *testing.T) {
	const w = 100000
	p := float64(w+1)*w + 5 // about one hidden w×w layer per network
	// float32 copies of a w×w layer the learner holds: values and
	// gradients of every network, two Adam moments (one RMSProp moment)
	// of the trained ones.
	want := map[string]float64{
		"ppo":    2 * 4,     // actor, critic (Adam)
		"a2c":    2 * 3,     // actor, critic (RMSProp)
		"a3c":    2 * 3,     // A2C's
		"impala": 2 * 4,     // actor, critic (Adam)
		"dqn":    4 + 2,     // q, q target
		"ddpg":   2*4 + 2*2, // actor, q1; their targets
		"td3":    3*4 + 3*2, // actor, q1, q2; their targets
		"sac":    3*4 + 2*2, // actor, q1, q2; the critics' targets
	}
	for _, sp := range Specs() {
		t.Run(sp.Name, func(t *testing.T) {
			copies, ok := want[sp.Name]
			if !ok {
				t.Fatalf("%s: add its networks to this test", sp.Name)
			}
			res := resolveWide(t, sp, w)
			e, err := env.Make(res.Header.Env)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			uses := algo.EstimateMemory(res.Header, res.Config, e.ObservationSpace(), e.ActionSpace(), 1024, nil)
			var nets *algo.MemoryUse
			for i := range uses {
				if strings.HasPrefix(uses[i].What, "networks") {
					nets = &uses[i]
				}
			}
			if nets == nil {
				t.Fatalf("no networks in the estimate %+v", uses)
			}
			if lo := 4 * copies * p; nets.Bytes < lo || nets.Bytes > 1.01*lo {
				t.Fatalf("networks need %.4g B, want %.4g (%v copies of a %d×%d layer): %+v", nets.Bytes, lo, copies, w, w, *nets)
			}
			if !strings.Contains(nets.Key, fmt.Sprintf("=[%d %d]", w, w)) {
				t.Fatalf("key %q does not name the widths", nets.Key)
			}
		})
	}
}

// TestHugeNetworkRefused: `hidden: [100000, 100000]` is refused by
// TrainRun with ErrMemory naming the key, and nothing is written.
func TestHugeNetworkRefused(t *testing.T) {
	sp, _ := Lookup("ppo")
	res := resolveWide(t, sp, 100000)
	if avail, _ := sysmem.Available(); avail <= 0 || avail > 100<<30 {
		t.Skipf("available memory %d B: unknown or enough for the networks", avail)
	}
	_, err := algo.TrainRun(context.Background(), res, algo.RunOptions{})
	if !errors.Is(err, algo.ErrMemory) || !strings.Contains(err.Error(), "hidden=[100000 100000]") {
		t.Fatalf("err %v, want ErrMemory naming hidden=[100000 100000]", err)
	}
	if _, err := os.Stat(filepath.Dir(res.Header.Out)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused run created %s (%v)", filepath.Dir(res.Header.Out), err)
	}
}

// resolveWide resolves sp with hidden widths [w, w] on an env it takes.
func resolveWide(t *testing.T, sp algo.Spec, w int) *algo.Resolved {
	t.Helper()
	var errs []error
	for _, id := range []string{"CartPole-v1", "Pendulum-v1"} {
		for _, key := range []string{"hidden", "net_arch"} {
			out := filepath.Join(t.TempDir(), "runs", "out")
			y := fmt.Sprintf("algo: %s\nenv: %s\nsteps: 1000\nout: %s\n%s:\n  %s: [%d, %d]\n", sp.Name, id, out, sp.Name, key, w, w)
			res, err := algo.Resolve([]byte(y), Specs(), algo.Overrides{})
			if err == nil {
				return res
			}
			errs = append(errs, err)
		}
	}
	t.Fatalf("%s: no config resolves: %v", sp.Name, errors.Join(errs...))
	return nil
}
