"""Measures a Gymnasium-style env's own steps per second in Python, without
gRPC: the ceiling for what herd_env.serve can deliver.

    python3 -m herd_env.bench --env module:Class [--kwargs JSON] [--steps N]
"""

import argparse
import json
import random
import sys
import time

from .serve import load_factory
from .spaces import Codec


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m herd_env.bench")
    p.add_argument("--env", required=True)
    p.add_argument("--kwargs", default="{}")
    p.add_argument("--steps", type=int, default=200000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    e = load_factory(args.env, json.loads(args.kwargs))()
    codec = Codec(e.action_space)
    rng = random.Random(args.seed)
    if codec.kind != "Discrete":
        print("herd_env.bench: only Discrete action spaces", file=sys.stderr)
        return 2
    acts = [codec.start + rng.randrange(codec.n) for _ in range(4096)]
    e.reset(seed=args.seed)
    t0 = time.perf_counter()
    for i in range(args.steps):
        _, _, term, trunc, _ = e.step(acts[i & 4095])
        if term or trunc:
            e.reset()
    dt = time.perf_counter() - t0
    print(json.dumps({"env": args.env, "steps": args.steps, "steps_per_s": round(args.steps / dt)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
