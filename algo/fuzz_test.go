package algo_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/all"
)

// FuzzResolve feeds arbitrary config files and one --set override to
// Resolve with every real algorithm: it must never panic, and what it
// accepts must marshal to a file that resolves to the same run.
// Seeds: configs/*.yaml and testdata/fuzz/FuzzResolve.
func FuzzResolve(f *testing.F) {
	files, _ := filepath.Glob("../configs/*.yaml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "")
	}
	f.Add([]byte("algo: ppo\nenv: CartPole-v1\nsteps: 1000\nppo:\n  num_envs: 2\nppo:\n  num_envs: 3\n"), "")
	f.Add([]byte("algo: dqn\nenv: CartPole-v1\nsteps: 1000\n"), "learning_rate=.inf")
	f.Add([]byte("algo: sac\nenv: Pendulum-v1\nsteps: 1000\nsac:\n  net_arch: [0]\n"), "buffer_size=-1")
	f.Add([]byte("algo: a2c\nenv: CartPole-v1\nsteps: 1e3\n"), "num_steps=0")
	f.Add([]byte("&a [*a]"), "x")
	specs := all.Specs()
	f.Fuzz(func(t *testing.T, data []byte, set string) {
		var ov algo.Overrides
		if set != "" {
			ov.Set = []string{set}
		}
		res, err := algo.Resolve(data, specs, ov)
		if err != nil {
			if res != nil {
				t.Fatalf("Resolve returned a result and the error %v", err)
			}
			return
		}
		b, err := res.Marshal()
		if err != nil {
			t.Fatalf("accepted config does not marshal: %v", err)
		}
		again, err := algo.Resolve(b, specs, algo.Overrides{})
		if err != nil {
			t.Fatalf("marshalled config is refused: %v\n%s", err, b)
		}
		b2, err := again.Marshal()
		if err != nil || string(b2) != string(b) {
			t.Fatalf("round trip differs (%v):\n%s\n---\n%s", err, b, b2)
		}
		if strings.Contains(string(b), ".nan") || strings.Contains(string(b), ".inf") {
			t.Fatalf("a non-finite setting was accepted:\n%s", b)
		}
	})
}
