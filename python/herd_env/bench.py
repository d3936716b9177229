"""Measures a Gymnasium-style env's own steps per second in Python, without
gRPC: the ceiling for what herd_env.serve can deliver.

    python3 -m herd_env.bench --env module:Class [--kwargs JSON] [--steps N] [--repeats R]

One env, random actions drawn in advance, reset at each episode's end. Each
repeat prints steps per wall second and per CPU second of this process, with
the load average: on a busy machine the wall figure is the process's share
of a core (at load 40 on 2 cores, a tenth of the idle figure), while the CPU
figure stays near the idle machine's; the last line gives the medians.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time

from .serve import load_factory
from .spaces import Codec


def _loop(e, acts, steps):
    """Steps e steps times; returns the number of episodes that ended."""
    episodes = 0
    for i in range(steps):
        _, _, term, trunc, _ = e.step(acts[i & 4095])
        if term or trunc:
            e.reset()
            episodes += 1
    return episodes


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m herd_env.bench")
    p.add_argument("--env", required=True)
    p.add_argument("--kwargs", default="{}")
    p.add_argument("--steps", type=int, default=200000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    e = load_factory(args.env, json.loads(args.kwargs))()
    codec = Codec(e.action_space)
    rng = random.Random(args.seed)
    if codec.kind != "Discrete":
        print("herd_env.bench: only Discrete action spaces", file=sys.stderr)
        return 2
    acts = [codec.start + rng.randrange(codec.n) for _ in range(4096)]
    e.reset(seed=args.seed)
    walls, cpus = [], []
    for r in range(args.repeats):
        load0 = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        episodes = _loop(e, acts, args.steps)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        walls.append(args.steps / dt)
        cpus.append(args.steps / dc if dc > 0 else float("inf"))
        print(json.dumps({"env": args.env, "repeat": r + 1, "steps": args.steps, "episodes": episodes,
                          "steps_per_s": round(walls[-1]), "steps_per_cpu_s": round(cpus[-1]),
                          "wall_s": round(dt, 4), "cpu_s": round(dc, 4),
                          "load1": [round(load0, 2), round(os.getloadavg()[0], 2)]}), flush=True)
    print(json.dumps({"env": args.env, "repeats": args.repeats, "median_steps_per_s": round(statistics.median(walls)),
                      "median_steps_per_cpu_s": round(statistics.median(cpus))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
