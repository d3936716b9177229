"""Pure-Python envs with Box and MultiDiscrete spaces, for herd's tests of
how herd_env.serve describes spaces and hands actions to envs."""


class Box:
    def __init__(self, low, high, shape):
        self.low, self.high, self.shape = low, high, shape


class MultiDiscrete:
    def __init__(self, nvec):
        self.nvec = nvec


class BoxEcho:
    """Observation Box(-10, 10, shape (2, 2)) given as nested lists; action a
    Box of 3 values. The next observation is [[a0, a1], [a2, sum(a)]] and
    the reward sum(a); an episode ends after 3 steps."""

    def __init__(self):
        self.observation_space = Box([[-10.0, -10.0], [-10.0, -10.0]], [[10.0, 10.0], [10.0, 10.0]], (2, 2))
        self.action_space = Box([-2.0, -2.0, -2.0], [2.0, 2.0, 2.0], (3,))
        self.t = 0

    def reset(self, seed=None):
        self.t = 0
        return [[0.0, 0.0], [0.0, 0.0]], {}

    def step(self, action):
        a = [float(v) for v in action]
        self.t += 1
        return [[a[0], a[1]], [a[2], sum(a)]], sum(a), self.t >= 3, False, {}


class MultiEcho:
    """Action MultiDiscrete([3, 4]); observation Box(0, 10, shape (2,));
    reward 10*a0 + a1."""

    def __init__(self):
        self.observation_space = Box(0.0, 10.0, (2,))
        self.action_space = MultiDiscrete([3, 4])

    def reset(self, seed=None):
        return [0.0, 0.0], {}

    def step(self, action):
        a0, a1 = int(action[0]), int(action[1])
        return [float(a0), float(a1)], float(10 * a0 + a1), False, False, {}


class Discrete:
    def __init__(self, n):
        self.n, self.start = n, 0


class LateState:
    """Makes `state` only in reset, as Gymnasium's Pendulum and MountainCar
    do. Action Discrete(2); observation Box(-10, 10, shape (2,)) = state;
    each step adds the action to state[0]."""

    def __init__(self):
        self.observation_space = Box(-10.0, 10.0, (2,))
        self.action_space = Discrete(2)

    def reset(self, seed=None):
        self.state = [0.0, 1.0]
        return list(self.state), {}

    def step(self, action):
        self.state = [self.state[0] + int(action), self.state[1]]
        return list(self.state), 1.0, False, False, {}


class Stuck:
    """Action Discrete(2); step never returns (an env hung in native code)."""

    def __init__(self):
        self.observation_space = Box(-1.0, 1.0, (1,))
        self.action_space = Discrete(2)

    def reset(self, seed=None):
        return [0.0], {}

    def step(self, action):
        import time
        while True:
            time.sleep(60)
