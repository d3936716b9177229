"""Small envs for measuring herd's remote transports (no Gymnasium needed).

    python3 -m herd_env.serve --env herd_env.testenvs:Trivial --port P
    python3 -m herd_env.serve --env herd_env.testenvs:Jittery \\
        --kwargs '{"mean_ms": 1, "cv": 2}' --port P
    python3 -m herd_env.serve --env herd_env.testenvs:Jittery --id CartPole \\
        --kwargs '{"env": "gymnasium:make", "env_kwargs": {"id": "CartPole-v1"}}' --port P

Pid is Trivial whose observation's first value is its process's id: a
test sees which process stepped a session (herd_env.serve --procs).

Trivial does no work: its step time is the transport's own cost (a 4-value
Box observation, a Discrete(2) action, episodes of `length` steps). Jittery
wraps another env (default Trivial) and sleeps before each of its steps for
a random time, log-normal with mean mean_ms and coefficient of variation cv
(standard deviation / mean), as herd's own step_time (dist: lognormal)
draws it, like a simulator whose step time varies. Its sleeps come from a
stream seeded by reset's seed, so they never change the wrapped env's
results.
"""

import math
import os
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


class Pid(Trivial):
    def __init__(self, length=200):
        super().__init__(length)
        self.observation_space = Box([0.0] * 4, [float(1 << 24)] * 4)
        self.obs = [float(os.getpid()), 0.0, 0.0, 0.0]


class Jittery:
    def __init__(self, env=None, env_kwargs=None, mean_ms=1.0, cv=2.0, length=200):
        if not mean_ms > 0 or not cv >= 0:
            raise ValueError("Jittery wants mean_ms > 0 and cv >= 0")
        if env is None:
            self.env = Trivial(length)
        else:
            from .serve import load_factory
            self.env = load_factory(env, env_kwargs or {})()
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        # A log-normal with mean m and CV c: sigma^2 = ln(1 + c^2),
        # mu = ln(m) - sigma^2 / 2.
        self.sigma = math.sqrt(math.log1p(cv * cv))
        self.mu = math.log(mean_ms / 1000.0) - self.sigma * self.sigma / 2
        self.rng = random.Random(0)

    @property
    def unwrapped(self):
        return getattr(self.env, "unwrapped", self.env)

    def reset(self, seed=None):
        if seed is not None:
            self.rng = random.Random(seed)
        return self.env.reset(seed=seed)

    def step(self, action):
        time.sleep(self.rng.lognormvariate(self.mu, self.sigma))
        return self.env.step(action)

    def close(self):
        close = getattr(self.env, "close", None)
        if close is not None:
            close()
