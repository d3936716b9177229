"""Small envs for measuring herd's remote transports (no Gymnasium needed).

    python3 -m herd_env.serve --env herd_env.testenvs:Trivial --port P
    python3 -m herd_env.serve --env herd_env.testenvs:Jittery \\
        --kwargs '{"mean_ms": 1, "cv": 2}' --port P

Trivial does no work: its step time is the transport's own cost. Jittery
sleeps a random time per step, gamma distributed with the given mean and
coefficient of variation (CV = standard deviation / mean), drawn from a
stream seeded by reset's seed, like a simulator whose step time varies.
Both have a 4-value Box observation and a Discrete(2) action, and end an
episode after `length` steps.
"""

import random
import time


class Discrete:
    def __init__(self, n, start=0):
        self.n, self.start = n, start


class Box:
    def __init__(self, low, high):
        self.low, self.high, self.shape = list(low), list(high), (len(low),)


class Trivial:
    def __init__(self, length=200):
        self.observation_space = Box([-1.0] * 4, [1.0] * 4)
        self.action_space = Discrete(2)
        self.length = length
        self.t = 0
        self.obs = [0.0, 0.0, 0.0, 0.0]

    def reset(self, seed=None):
        self.t = 0
        return self.obs, {}

    def step(self, action):
        self.t += 1
        return self.obs, 1.0, self.t >= self.length, False, {}

    def close(self):
        pass


class Jittery(Trivial):
    def __init__(self, mean_ms=1.0, cv=2.0, length=200):
        super().__init__(length)
        if mean_ms < 0 or cv <= 0:
            raise ValueError("Jittery wants mean_ms >= 0 and cv > 0")
        # Gamma(k, theta) has mean k*theta and CV 1/sqrt(k).
        self.k = 1.0 / (cv * cv)
        self.theta = mean_ms / 1000.0 / self.k
        self.rng = random.Random(0)

    def reset(self, seed=None):
        if seed is not None:
            self.rng = random.Random(seed)
        return super().reset(seed)

    def step(self, action):
        if self.theta > 0:
            time.sleep(self.rng.gammavariate(self.k, self.theta))
        return super().step(action)
