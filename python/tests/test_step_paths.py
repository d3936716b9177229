"""herd_env.serve's step paths against their plain forms, bit for bit:
step_lists with a segment (the shm session's step: results written into the segment,
float32 observations copied with NumPy) and step (the gRPC answer) give
the segment bytes and the EnvResponse a per-env loop with per-value
conversions (herd_env's code before its fast paths) gives; the envs get the
same actions (type, dtype, shape, values) and the errors are the same. Over
seeded envs whose observations are float32 or float64 arrays (small and
large, with NaN, infinities and values beyond float32's range), lists or
nested lists, with Python and NumPy rewards and flags, Discrete, Box and
MultiDiscrete actions (some invalid), autoreset on and off, a time limit,
and envs that fail; and again with NumPy hidden from herd_env.

    cd python && PYTHONPATH=.:tests python3 -m unittest test_step_paths
"""

import array
import math
import random
import unittest
from unittest import mock

import numpy as np

from herd_env import PROTOCOL_VERSION, serve, shm, spaces
from herd_env._proto.herd.v1 import env_pb2
from shmtest import plain_write, segment


class Discrete:
    def __init__(self, n, start=0):
        self.n, self.start = n, start


class Box:
    def __init__(self, shape):
        self.shape = shape
        k = int(np.prod(shape)) if shape else 1
        self.low, self.high = [-1.0] * k, [1.0] * k


class MultiDiscrete:
    def __init__(self, nvec):
        self.nvec = nvec


_ACTIONS = {
    "discrete": Discrete(3, start=-1),
    "box": Box((3,)),
    "box2x2": Box((2, 2)),
    "box0d": Box(()),
    "multi": MultiDiscrete([3, 2]),
}


class Mixed:
    """A seeded env: observations of kind obs ("f32", "f64", "list",
    "nested", "mixed": any of them, "bad": sometimes the wrong length), of
    dim values; rewards and flags of varied types; episodes end at random;
    with fail, step sometimes raises. Records the last action it got."""

    def __init__(self, obs="f32", dim=4, act="discrete", fail=False):
        self.kind, self.dim, self.fail = obs, dim, fail
        self.observation_space = Box((dim,))
        self.action_space = _ACTIONS[act]
        self.rng = random.Random(0)
        self.last = None

    def _value(self):
        r = self.rng.random()
        if r < 0.03:
            return self.rng.choice([math.nan, math.inf, -math.inf, -0.0, 1e-46, 3.5e38, -1e300, 1e300])
        return self.rng.uniform(-5, 5)

    def _obs(self):
        kind = self.kind
        if kind in ("mixed", "bad"):
            kind = self.rng.choice(["f32", "f64", "list", "nested"])
        dim = self.dim
        if self.kind == "bad" and self.rng.random() < 0.05:
            dim += 1
        vals = [self._value() for _ in range(dim)]
        if kind == "f32":
            with np.errstate(over="ignore"):
                return np.array(vals, dtype=np.float32)
        if kind == "f64":
            return np.array(vals, dtype=np.float64)
        if kind == "nested" and dim % 2 == 0:
            return [vals[:dim // 2], vals[dim // 2:]]
        return vals

    def reset(self, seed=None):
        if seed is not None:
            self.rng = random.Random(seed)
        return self._obs(), {}

    def step(self, action):
        a = action.tolist() if hasattr(action, "tolist") else action
        self.last = (type(action).__name__, str(getattr(action, "dtype", "")), getattr(action, "shape", None), repr(a))
        if self.fail and self.rng.random() < 0.03:
            raise RuntimeError("env failed")
        rng = self.rng
        rew = rng.choice([1.0, 2, np.float32(0.1), np.float64(-0.3), True, rng.uniform(-1, 1)])
        term = rng.random() < 0.08
        trunc = rng.random() < 0.04
        term = rng.choice([term, np.bool_(term), int(term)])
        return self._obs(), rew, term, trunc, {}


def plain_rows(codec, actions, n):
    """The envs' actions as the per-env loop made them, or (i, why)."""
    d, out = codec.dim, []
    for i in range(n):
        a = actions[i * d:(i + 1) * d]
        why = codec.check(a)
        if why is not None:
            return i, why
        out.append(codec.to_env(a))
    return out


def plain_step(sess, actions):
    """The step as the per-env loop did it: (obs, rewards, terminated,
    truncated, final_obs) lists, or an error EnvResponse."""
    n, ad = len(sess.envs), sess.act_codec.dim
    if len(actions) != n * ad:
        return serve._status(serve.grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ACTION",
                             "%d envs want %dx%d action values, got %d" % (n, n, ad, len(actions)))
    rows = plain_rows(sess.act_codec, actions, n)
    if type(rows) is tuple:
        return serve._status(serve.grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ACTION", "env %d: %s" % rows)
    if False in sess.running:
        return serve._status(serve.grpc.StatusCode.FAILED_PRECONDITION, "NEEDS_RESET",
                             "env %d: step before reset or after the episode ended" % sess.running.index(False))
    obs, final, rewards, terms, truncs = [], [], [], [], []

    def put(o, out):
        flat = spaces.flatten(o)
        if len(flat) != sess.obs_codec.dim:
            raise ValueError("observation has %d values, the space %d" % (len(flat), sess.obs_codec.dim))
        out.extend(flat)
    try:
        for i, (e, a) in enumerate(zip(sess.envs, rows)):
            o, r, term, trunc, _ = e.step(a)
            sess.elapsed[i] += 1
            if sess.max_steps > 0 and sess.elapsed[i] >= sess.max_steps:
                trunc = True
            term, trunc = bool(term), bool(trunc)
            rewards.append(float(r))
            terms.append(term)
            truncs.append(trunc)
            if term or trunc:
                sess.running[i] = False
                if sess.autoreset:
                    put(o, final)
                    o, _ = e.reset(seed=None)
                    sess.elapsed[i], sess.running[i] = 0, True
            put(o, obs)
    except Exception as ex:
        return serve._status(serve.grpc.StatusCode.INTERNAL, "ENV_ERROR", "step: %r" % (ex,))
    return obs, rewards, terms, truncs, final


def results(seg):
    """What the client reads of a step: observations, rewards, flags, and
    the final observations of the envs whose episode ended."""
    n, od = len(seg.term), seg.od
    ended = [i for i in range(n) if seg.term[i] or seg.trunc[i]]
    return (seg.obs.tobytes(), seg.rew.tobytes(), seg.term.tobytes(), seg.trunc.tobytes(),
            [seg.final[i * od:(i + 1) * od].tobytes() for i in ended])


class StepPathsTest(unittest.TestCase):
    def run_case(self, n, steps, autoreset=True, max_steps=0, **kw):
        """Steps three twin sessions (step_lists with a segment, step, plain) with the same
        actions and compares them after every step."""
        def make():
            sess, bad = serve.EnvServicer(lambda: Mixed(**kw), "E").open(env_pb2.EnvRequest(open=env_pb2.OpenRequest(
                protocol_version=PROTOCOL_VERSION, env_id="E", num_envs=n, autoreset=autoreset,
                max_episode_steps=max_steps)))
            self.assertIsNone(bad)
            return sess
        into, grpc_sess, plain = make(), make(), make()
        od, ad = into.obs_codec.dim, into.act_codec.dim
        seg_new, seg_plain = segment(n, od, ad), segment(n, od, ad)
        self.addCleanup(seg_new.close)
        self.addCleanup(seg_plain.close)
        codec = into.act_codec
        rng = random.Random(n * 1000 + steps)
        seeds = list(range(n))
        answers = {"ok": 0, "error": 0}
        for k in range(steps):
            if k % 50 == 0 or False in plain.running:
                seeds = [rng.randrange(1 << 20) for _ in range(n)]
                want_reset = plain.reset(seeds)[0].SerializeToString()
                for s in (into, grpc_sess):
                    self.assertEqual(s.reset(seeds)[0].SerializeToString(), want_reset)
            acts = self.actions(codec, n, rng)
            want = plain_step(plain, acts)
            got_into = into.step_lists(acts, seg_new)
            got_grpc = grpc_sess.step(acts)
            for s in (into, grpc_sess):
                self.assertEqual([e.last for e in s.envs], [e.last for e in plain.envs], "step %d: actions the envs got" % k)
                self.assertEqual(s.running, plain.running)
                self.assertEqual(s.elapsed if max_steps > 0 else None, plain.elapsed if max_steps > 0 else None)
            if type(want) is not tuple:
                answers["error"] += 1
                self.assertIsNotNone(got_into, "step %d: step_lists into the segment answered, plain failed with %s" % (k, want))
                self.assertEqual(got_into.SerializeToString(), want.SerializeToString(), "step %d" % k)
                self.assertEqual(got_grpc.SerializeToString(), want.SerializeToString(), "step %d" % k)
                continue
            answers["ok"] += 1
            self.assertIsNone(got_into, "step %d: %s" % (k, got_into))
            plain_write(seg_plain, *want)
            self.assertEqual(results(seg_new), results(seg_plain), "step %d: segment" % k)
            obs, rewards, terms, truncs, final = want
            self.assertEqual(got_grpc.SerializeToString(), env_pb2.EnvResponse(batch=env_pb2.Batch(
                obs=obs, rewards=rewards, terminated=terms, truncated=truncs, final_obs=final)).SerializeToString(),
                "step %d: gRPC answer" % k)
        return answers

    @staticmethod
    def actions(codec, n, rng):
        """Mostly valid actions; now and then an invalid one or a wrong count."""
        if rng.random() < 0.02:
            return [0.0] * (n * codec.dim + 1)
        out = []
        for _ in range(n):
            if codec.kind == "Discrete":
                out.append(float(rng.randrange(codec.start, codec.start + codec.n)))
            elif codec.kind == "Box":
                out.extend(float(array.array("f", [rng.uniform(-2, 2)])[0]) for _ in range(codec.dim))
            else:
                out.extend(float(rng.randrange(v)) for v in codec.nvec)
        if rng.random() < 0.05:
            out[rng.randrange(len(out))] = rng.choice([math.nan, math.inf, -math.inf, 0.5, 7.0, -3.0, 1e300])
        return out

    def run_all(self):
        cases = [
            dict(n=8, steps=400, obs="f32"),
            dict(n=8, steps=300, obs="f32", dim=20),  # NumPy's copy into the segment
            dict(n=8, steps=300, obs="f64"),
            dict(n=4, steps=300, obs="f64", dim=24),
            dict(n=8, steps=300, obs="list"),
            dict(n=3, steps=300, obs="list", dim=18),
            dict(n=5, steps=300, obs="nested", dim=6),
            dict(n=6, steps=400, obs="mixed", dim=16, act="box"),
            dict(n=6, steps=300, obs="bad", dim=16, fail=True),
            dict(n=6, steps=300, obs="bad", dim=4, fail=True, act="box2x2"),
            dict(n=1, steps=300, obs="f32", act="box"),
            dict(n=4, steps=300, obs="f32", dim=32, act="box0d"),
            dict(n=4, steps=300, obs="mixed", dim=4, act="multi"),
            dict(n=8, steps=300, obs="f32", dim=20, autoreset=False),
            dict(n=8, steps=300, obs="f32", max_steps=7),
            dict(n=8, steps=300, obs="f32", dim=20, max_steps=5, fail=True),
        ]
        total = {"ok": 0, "error": 0}
        for c in cases:
            with self.subTest(**c):
                got = self.run_case(**c)
                for k in total:
                    total[k] += got[k]
        # The cases must reach both answers, or they compare too little.
        self.assertGreater(total["ok"], 3000)
        self.assertGreater(total["error"], 100)

    def test_with_numpy(self):
        self.run_all()

    def test_without_numpy(self):
        # herd_env as it runs without NumPy: no arrays for actions, no
        # NumPy views of the segment, arrays from the env treated as any
        # other sequence.
        no_array = type("_NoNdarray", (), {})
        with mock.patch.object(spaces, "_np", None), mock.patch.object(shm, "_np", None), \
                mock.patch.object(serve, "_ndarray", no_array), mock.patch.object(serve, "_f32", None):
            self.run_all()


if __name__ == "__main__":
    unittest.main()
