package envsvc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/all"
	"herd/run"
)

// TestRemoteMixedActionSpacesRefused: a remote env whose agents have
// different action spaces is refused before training, with a policy per
// agent too (the remote vector has one action space for every agent),
// naming the agents and their spaces.
func TestRemoteMixedActionSpacesRefused(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	file := `algo: ppo
env: grpc://` + addr + `/toy/signal_v0
steps: 640
multiagent:
  policies: [speaker, listener]
  policy_mapping: {speaker_0: speaker, listener_0: listener}
ppo: {num_envs: 8, num_steps: 16, num_minibatches: 2}
`
	for _, executor := range []string{"local", "hts", "dist"} {
		res, err := algo.Resolve([]byte(file+"runtime: {executor: "+executor+"}\n"), all.Specs(), algo.Overrides{})
		if err == nil {
			_, err = algo.TrainRun(context.Background(), res, algo.RunOptions{NoFiles: true, Executors: run.Executors()})
		}
		want := "agents speaker_0 (Discrete(4, start=0)) and listener_0 (Discrete(5, start=0)) have different action spaces; a remote env's agents must share one"
		if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want ErrConfig containing %q", executor, err, want)
		}
	}
}
