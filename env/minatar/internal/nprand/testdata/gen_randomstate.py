"""Writes randomstate.json.gz: what numpy.random.RandomState draws.

    /usr/bin/python3 gen_randomstate.py [--out randomstate.json.gz]

Run with Debian's python3-numpy. Each case seeds a RandomState (an integer
seed, or an array of at least two 32-bit words: NumPy squeezes a one-word
array to an integer seed) and performs a fixed mix of rand() and
randint(low, high) calls that covers every path of NumPy's bounded-integer
generator for the int64 dtype: an empty range (no draw), 32-bit masked
rejection, the full 32-bit range, and 64-bit masked rejection; and more than
624 words, so the state is regenerated several times. Doubles are written
with float.hex() and integers as decimal strings, so nothing is rounded.
"""

import argparse
import gzip
import json

import numpy as np

RANGES = [
    (0, 2), (1, 9), (1, 6), (0, 3), (5, 6), (-7, 100), (0, 8),
    (0, 2**32), (-3, 2**32 - 3), (0, 2**32 - 1), (10, 2**32 + 11),
    (-3, 2**33 + 5), (0, 2**40), (-(2**62), 2**62 + 12345), (-(2**63), 2**63 - 1),
]

SEEDS = [0, 1, 42, 12345, 2**31, 2**32 - 1]
KEYS = [[0, 0], [1, 2], [0xFFFFFFFF, 7], [3, 1, 4, 1, 5]]


def run(rs, n):
    ops, out = [], []
    for t in range(n):
        k = t % (len(RANGES) + 3)
        if k >= len(RANGES):
            ops.append(["rand"])
            out.append(float(rs.rand()).hex())
        else:
            lo, hi = RANGES[k]
            ops.append(["randint", str(lo), str(hi)])
            out.append(str(int(rs.randint(lo, hi))))
    return ops, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="randomstate.json.gz")
    args = ap.parse_args()
    cases = []
    for s in SEEDS:
        ops, out = run(np.random.RandomState(s), 1500)
        cases.append({"seed": s, "ops": ops, "out": out})
    for key in KEYS:
        ops, out = run(np.random.RandomState(np.array(key, dtype=np.uint32)), 700)
        cases.append({"key": key, "ops": ops, "out": out})
    doc = {"numpy": np.__version__, "cases": cases}
    with gzip.GzipFile(args.out, "wb", mtime=0) as f:
        f.write(json.dumps(doc, separators=(",", ":")).encode())


if __name__ == "__main__":
    main()
