package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainMultiAgentConfigs trains the shipped IPPO, MAPPO and DQN configs on
// simple_spread for a few iterations and evaluates them: eval prints the
// team return and each agent's.
func TestTrainMultiAgentConfigs(t *testing.T) {
	extra := map[string]string{"ippo-simple-spread": "num_steps=25", "mappo-simple-spread": "num_steps=25",
		"dqn-simple-spread": "learning_starts=300"}
	for _, name := range []string{"ippo-simple-spread", "mappo-simple-spread", "dqn-simple-spread"} {
		t.Run(name, func(t *testing.T) {
			run := filepath.Join(t.TempDir(), "run")
			out, err := runHerd(t, "train", "--config", filepath.Join("..", "..", "configs", name+".yaml"),
				"--steps", "2400", "--out", run, "--set", extra[name])
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

// TestTrainSeveralPolicies trains the shipped configs with a multiagent
// section (two PPO policies; PPO and DQN) for two rollouts and evaluates
// them with each agent's own policy; simple_tag is competitive, so eval
// prints each team's return and no sum over the teams.
func TestTrainSeveralPolicies(t *testing.T) {
	for _, name := range []string{"ppo-simple-tag-policies", "twin-simple-tag"} {
		t.Run(name, func(t *testing.T) {
			run := filepath.Join(t.TempDir(), "run")
			out, err := runHerd(t, "train", "--config", filepath.Join("..", "..", "configs", name+".yaml"),
				"--steps", "3200", "--out", run, "--set", "num_steps=25")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(out, "done: 3200 steps") {
				t.Fatalf("output:\n%s", out)
			}
			out, err = runHerd(t, "eval", "--run", run, "--episodes", "2")
			if err != nil || strings.Contains(out, "team return ") || strings.Contains(out, "episodes, return ") ||
				!strings.Contains(out, "adversary return ") || !strings.Contains(out, "; agent return ") || !strings.Contains(out, "; agent_0 ") {
				t.Fatalf("eval: %v\n%s", err, out)
			}
		})
	}
}
