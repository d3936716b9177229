"""A pure-Python CartPole (no NumPy) with Gymnasium's CartPole-v1 equations in
float64, written for herd's tests: herd steps it through herd_env.serve and
compares the transitions with its own Go CartPole."""

import math
import random


class Discrete:
    def __init__(self, n, start=0):
        self.n, self.start = n, start


class Box:
    def __init__(self, low, high):
        self.low, self.high, self.shape = list(low), list(high), (len(low),)


class CartPole:
    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, max_steps=None):
        self.max_steps = max_steps  # truncate episodes here, as Gymnasium's TimeLimit (None: never)
        self.t = 0
        f32max = 3.4028234663852886e38
        high = [self.x_threshold * 2, f32max, self.theta_threshold_radians * 2, f32max]
        self.observation_space = Box([-h for h in high], high)
        self.action_space = Discrete(2)
        self.state = None
        self.rng = random.Random(0)

    def _get_obs(self):
        return list(self.state)

    def reset(self, seed=None):
        if seed is not None:
            self.rng = random.Random(seed)
        self.state = [self.rng.uniform(-0.05, 0.05) for _ in range(4)]
        self.t = 0
        return self._get_obs(), {}

    def step(self, action):
        assert action in (0, 1), action
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + self.polemass_length * (theta_dot * theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * (costheta * costheta) / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = [x, x_dot, theta, theta_dot]
        terminated = (x < -self.x_threshold or x > self.x_threshold
                      or theta < -self.theta_threshold_radians or theta > self.theta_threshold_radians)
        self.t += 1
        truncated = self.max_steps is not None and self.t >= self.max_steps
        return self._get_obs(), 1.0, terminated, truncated, {}

    def close(self):
        pass
