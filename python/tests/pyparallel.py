"""A small pure-Python multi-agent env with PettingZoo's Parallel API (no
PettingZoo, no NumPy), written for herd's tests of herd_env's multi-agent
server. Its agents leave at different times, and their observations differ
in size; herd's tests carry a Go copy of the same rules
(service/envsvc/python_parallel_test.go) and compare step by step."""

import time


class Discrete:
    def __init__(self, n):
        self.n = n


class Box:
    def __init__(self, low, high):
        self.low, self.high, self.shape = list(low), list(high), (len(low),)


class LineWalk:
    """Three agents walk on a line of integers, each to its own goal.

    Action Discrete(3): move by action - 1. Reward: -|position - goal| after
    the move. An agent that reaches its goal terminates and leaves agents;
    one still walking after max_cycles steps is truncated. Observations:
    [position, goal] for the walkers, [position, goal, steps taken] for the
    runner. Starts and goals are arithmetic in the seed and the episode
    number (reset(seed=None) starts the next episode), so another language
    can repeat them exactly.
    """

    metadata = {"name": "linewalk_v0"}

    def __init__(self, max_cycles=6, sleep_s=0.0, fail_step=0):
        # sleep_s (a slow step) and fail_step (step number fail_step of an
        # episode raises) are for herd's fault tests.
        self.sleep_s, self.fail_step = sleep_s, fail_step
        self.possible_agents = ["walker_0", "walker_1", "runner"]
        self.agents = []
        self.max_cycles = max_cycles
        self._seed, self._episode = 0, 0
        self._obs_spaces = {a: Box([-20.0] * self._dim(a), [20.0] * self._dim(a)) for a in self.possible_agents}

    @staticmethod
    def _dim(agent):
        return 3 if agent == "runner" else 2

    def observation_space(self, agent):
        return self._obs_spaces[agent]

    def action_space(self, agent):
        return Discrete(3)

    def _obs(self, a):
        o = [float(self.pos[a]), float(self.goal[a])]
        if a == "runner":
            o.append(float(self.t))
        return o

    def reset(self, seed=None, options=None):
        if seed is not None:
            self._seed, self._episode = seed, 0
        else:
            self._episode += 1
        k = self._seed % 1000 + 7 * self._episode
        self.pos = {a: (k + 3 * i) % 7 - 3 for i, a in enumerate(self.possible_agents)}
        self.goal = {a: (5 * k + i) % 5 - 2 for i, a in enumerate(self.possible_agents)}
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.t + 1 == self.fail_step:
            raise RuntimeError("LineWalk fails at step %d, as asked" % self.fail_step)
        self.t += 1
        obs, rew, term, trunc, infos = {}, {}, {}, {}, {}
        for a in self.agents:
            self.pos[a] += int(actions[a]) - 1
            rew[a] = -float(abs(self.pos[a] - self.goal[a]))
            term[a] = self.pos[a] == self.goal[a]
            trunc[a] = not term[a] and self.t >= self.max_cycles
            obs[a] = self._obs(a)
            infos[a] = {}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, infos

    def close(self):
        pass


class MaskedWalk(LineWalk):
    """LineWalk with PettingZoo's action masks and global state.

    Each agent's info holds action_mask (a list of 0/1, as PettingZoo's
    int8 arrays): agent i may not step left (action 0) from position -3
    or below, nor right (action 2) when i + t is odd (t: steps taken); it
    may always stay (1). The info also holds a key herd ignores. state()
    is [t, each possible agent's position, each one's goal, how many agents
    are still in the episode]: 8 values, not the 7 of the observations
    concatenated. herd's tests carry a Go copy (service/envsvc).
    """

    metadata = {"name": "maskedwalk_v0"}

    def __init__(self, **kw):
        super().__init__(**kw)
        self.state_space = Box([-20.0] * 8, [20.0] * 8)

    def _infos(self, agents):
        out = {}
        for i, a in enumerate(self.possible_agents):
            if a in agents:
                left = 1 if self.pos[a] > -3 else 0
                right = 1 if (i + self.t) % 2 == 0 else 0
                out[a] = {"action_mask": [left, 1, right], "walked": self.t}
        return out

    def reset(self, seed=None, options=None):
        obs, _ = super().reset(seed=seed, options=options)
        return obs, self._infos(obs)

    def step(self, actions):
        obs, rew, term, trunc, _ = super().step(actions)
        return obs, rew, term, trunc, self._infos(obs)

    def state(self):
        return ([float(self.t)] + [float(self.pos[a]) for a in self.possible_agents]
                + [float(self.goal[a]) for a in self.possible_agents] + [float(len(self.agents))])
