package all

import (
	"herd/algo"
	"herd/algo/ddpg"
	"herd/algo/dqn"
	"herd/algo/sac"
	"herd/algo/td3"
)

// offPolicy lists the off-policy algorithms: DQN for discrete actions, then
// SAC, TD3 and DDPG for continuous ones.
func offPolicy() []algo.Spec {
	return []algo.Spec{dqn.Spec(), sac.Spec(), td3.Spec(), ddpg.Spec()}
}
