package ppo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/nn"
)

// TestDictObservations: PPO trains on toy/GoalLine-v0, whose observation
// is a Dict ({goal: Discrete(2), position: Box(1)}): the policy reads its
// flattened Box (the goal one-hot, then the position; the checkpoint
// records that space) and learns to walk to the goal it observes, which
// a policy blind to the goal cannot do (always one way averages −0.075).
func TestDictObservations(t *testing.T) {
	res, err := algo.Resolve([]byte(`algo: ppo
env: toy/GoalLine-v0
seed: 1
steps: 20480
ppo: {num_envs: 8, num_steps: 64, hidden: [32]}
`), []algo.Spec{Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	res.Header.Out = t.TempDir()
	sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Dir: algo.DirForce, EvalEpisodes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if sum.EvalReturnMean < 0.7 {
		t.Errorf("evaluation return %.3f, want ≥ 0.7 (best 0.85)", sum.EvalReturnMean)
	}
	b, err := os.ReadFile(filepath.Join(res.Header.Out, algo.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	ck, err := nn.ReadSafetensors(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ck.Metadata[algo.MetaObsSpace], "Box([0 0 -1], [1 1 1], [3])"; got != want {
		t.Errorf("the policy read observations of %s, want the flattened Dict %s", got, want)
	}
}

// TestDictRefusesConvEncoder: a convolutional encoder cannot read a Dict
// observation; the config is refused, naming the Dict.
func TestDictRefusesConvEncoder(t *testing.T) {
	_, err := algo.Resolve([]byte("algo: ppo\nenv: toy/GoalLine-v0\nsteps: 1024\nppo: {encoder: nature}\n"), []algo.Spec{Spec()}, algo.Overrides{})
	if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "observations are a Dict space, Dict(goal: Discrete(2, start=0), position: Box([-1], [1], [1]))") {
		t.Errorf("encoder nature on a Dict: %v", err)
	}
}
