"""An ALE-shaped env for herd's tests (NumPy, no ALE): 210x160x3 uint8
frames, Discrete(4) actions named as Breakout's, and info["lives"].

Frame t of an episode holds pixel value (i + 7 t + a) mod 256 at flat index
i, a the last action; a life is lost every 5 steps and the game ends with
the third."""

import numpy as np


class Discrete:
    def __init__(self, n, start=0):
        self.n, self.start = n, start


class Box:
    def __init__(self, shape):
        self.shape, self.dtype = shape, np.dtype("uint8")
        self.low, self.high = np.zeros(shape, np.uint8), np.full(shape, 255, np.uint8)


class Atari:
    def __init__(self):
        self.observation_space = Box((210, 160, 3))
        self.action_space = Discrete(4)
        self.idx = np.arange(210 * 160 * 3, dtype=np.int64).reshape(210, 160, 3)
        self.t = self.lives = 0

    def get_action_meanings(self):
        return ["NOOP", "FIRE", "RIGHT", "LEFT"]

    def _frame(self, a):
        return ((self.idx + 7 * self.t + a) % 256).astype(np.uint8)

    def reset(self, seed=None):
        self.t, self.lives = 0, 3
        return self._frame(0), {"lives": self.lives}

    def step(self, a):
        self.t += 1
        if self.t % 5 == 0:
            self.lives -= 1
        return self._frame(int(a)), 1.5, self.lives == 0, False, {"lives": self.lives}
