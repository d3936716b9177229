package distexec_test

import (
	"fmt"
	"testing"
	"time"

	"herd/algo/ppo"
)

const lstmDist = `algo: ppo
env: CartPoleNoVel-v1
seed: 2
steps: 1024
log_every: 256
runtime: {executor: dist, env_workers: 2, transport: %s, %s}
ppo: {num_envs: 4, num_steps: 16, num_minibatches: 2, update_epochs: 2, hidden: [8], recurrent: {type: lstm, hidden: 8}}
`

// PPO-LSTM runs under dist on both transports, with policy workers (and
// env groups) or inline copies: the env workers carry each env's state in
// their requests and push it with each segment, and the learner, which
// refuses a recurrent segment without its start state, learns from every
// one.
func TestRecurrentTrainRun(t *testing.T) {
	for _, c := range []struct{ tr, rt string }{
		{"inproc", "policy_workers: 2"},
		{"inproc", "inference: inline"},
		{"nats", "policy_workers: 2, env_groups: 2"},
	} {
		t.Run(c.tr+"/"+c.rt, func(t *testing.T) {
			res, sum := trainFile(t, fmt.Sprintf(lstmDist, c.tr, c.rt), 90*time.Second, ppo.Spec())
			if sum.Steps != res.Header.Steps || sum.Episodes == 0 {
				t.Errorf("summary: %d steps (want %d), %d episodes", sum.Steps, res.Header.Steps, sum.Episodes)
			}
		})
	}
}
