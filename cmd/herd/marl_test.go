package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainMultiAgentConfigs trains the shipped IPPO and MAPPO configs on
// simple_spread for a few iterations and evaluates them: eval prints the
// team return and each agent's.
func TestTrainMultiAgentConfigs(t *testing.T) {
	for _, name := range []string{"ippo-simple-spread", "mappo-simple-spread"} {
		t.Run(name, func(t *testing.T) {
			run := filepath.Join(t.TempDir(), "run")
			out, err := runHerd(t, "train", "--config", filepath.Join("..", "..", "configs", name+".yaml"),
				"--steps", "2400", "--out", run, "--set", "num_steps=25", "--set", "update_epochs=1")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(out, "done: 2400 steps") {
				t.Fatalf("output:\n%s", out)
			}
			out, err = runHerd(t, "eval", "--run", run, "--episodes", "2")
			if err != nil || !strings.Contains(out, "team return ") || !strings.Contains(out, "; agent_2 ") {
				t.Fatalf("eval: %v\n%s", err, out)
			}
		})
	}
}
