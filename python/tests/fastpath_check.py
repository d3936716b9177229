"""Checks herd_env's step fast paths against their plain forms (run by
service/envsvc's TestPythonFastPaths; exits non-zero on a difference):

- Codec.rows for Discrete: the one-pass check accepts and rejects exactly
  what the per-action loop does, with the same message;
- shm._Segment.write: the precompiled struct packers put the same bytes in
  the segment as array.array's conversions (float32 rounding, NaN, values
  beyond float32's range becoming ±inf, rewards, done flags, final obs).
"""

import math
import random
import sys

from herd_env.spaces import Codec
from shmtest import plain_write, segment


class Discrete:
    def __init__(self, n, start=0):
        self.n, self.start = n, start


def slow_rows(codec, actions):
    lo, hi, out = codec.start, codec.start + codec.n, []
    for i, v in enumerate(actions):
        k = int(v) if v == v and v not in (math.inf, -math.inf) else None
        if k is None or k != v or not lo <= k < hi:
            return i, "%r not in Discrete(%d, start=%d)" % (v, codec.n, codec.start)
        out.append(k)
    return out


def check_rows(rng):
    odd = [math.nan, math.inf, -math.inf, -0.0, 0.5, 1.5, -1.0, 2.0, 3.0, 1e30, -1e30, 2.0000002]
    for trial in range(20000):
        c = Codec(Discrete(rng.randint(1, 4), rng.choice([0, 0, -1, 2])))
        n = rng.randint(0, 6)
        acts = [float(rng.randint(c.start - 1, c.start + c.n)) for _ in range(n)]
        if n and rng.random() < 0.5:
            acts[rng.randrange(n)] = rng.choice(odd)
        got, want = c.rows(acts, n), slow_rows(c, acts)
        if repr(got) != repr(want):
            sys.exit("rows(%r) on Discrete(%d, start=%d): fast %r, plain %r" % (acts, c.n, c.start, got, want))


def check_write(rng):
    odd = [math.nan, math.inf, -math.inf, 3.5e38, -3.5e38, 1e300, 1e-46, -0.0, 0.1, 1 / 3]
    for trial in range(3000):
        n, od = rng.randint(1, 5), rng.randint(1, 4)
        a, b = segment(n, od, 1), segment(n, od, 1)
        obs = [rng.uniform(-10, 10) if rng.random() < 0.8 else rng.choice(odd) for _ in range(n * od)]
        rewards = [rng.uniform(-5, 5) if rng.random() < 0.9 else rng.choice(odd) for _ in range(n)]
        terms = [rng.random() < 0.3 for _ in range(n)]
        truncs = [rng.random() < 0.2 for _ in range(n)]
        ended = sum(1 for t, u in zip(terms, truncs) if t or u)
        final = [rng.uniform(-1, 1) for _ in range(ended * od)]
        a.write(obs, rewards, terms, truncs, final)
        plain_write(b, obs, rewards, terms, truncs, final)
        if a.mm[:] != b.mm[:]:
            sys.exit("write differs from the array path: obs %r rewards %r terms %r truncs %r" % (obs, rewards, terms, truncs))
        a.close()
        b.close()


def main():
    rng = random.Random(7)
    check_rows(rng)
    check_write(rng)
    print("fastpath_check: ok")


if __name__ == "__main__":
    main()
