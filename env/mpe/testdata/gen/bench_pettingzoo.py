"""Times PettingZoo 1.24.3's MPE parallel envs, for comparison with herd's
BenchmarkStep (env/mpe):

    /usr/bin/python3 bench_pettingzoo.py --pettingzoo DIR [--steps 20000]

Like the Go benchmark, each step passes fixed discrete actions for every
agent (cycling through five action sets) to parallel_env(); the env is
reset when its episode ends, and the reset is timed with the steps.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def bench(module, steps):
    import importlib

    mod = importlib.import_module("pettingzoo.mpe." + module)
    env = mod.parallel_env()
    env.reset(seed=1)
    acts = []
    for k in range(5):
        acts.append({a: (k * 7 + j * 3) % env.action_space(a).n for j, a in enumerate(env.possible_agents)})
    n_agents = len(env.possible_agents)
    t0 = time.perf_counter()
    for i in range(steps):
        if not env.agents:
            env.reset()
        env.step(acts[i % 5])
    dt = time.perf_counter() - t0
    env.close()
    return dt / steps, n_agents


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pettingzoo", required=True)
    ap.add_argument("--steps", type=int, default=20000)
    args = ap.parse_args()
    sys.path.insert(0, HERE)  # the gymnasium stand-in
    sys.path.insert(1, os.path.abspath(args.pettingzoo))
    import numpy as np

    for module in ("simple_spread_v3", "simple_tag_v3", "simple_reference_v3"):
        per, n = bench(module, args.steps)
        print(f"{module}: {per * 1e6:.1f} µs/env-step, {1 / per:.0f} env-steps/s, "
              f"{n / per:.0f} agent-steps/s (PettingZoo 1.24.3, NumPy {np.__version__}, {args.steps} steps)")


if __name__ == "__main__":
    main()
