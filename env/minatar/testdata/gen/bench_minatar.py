"""Times MinAtar's own step, for comparison with herd's BenchmarkStep.

    taskset -c 0 /usr/bin/python3 bench_minatar.py --minatar DIR [--steps N]

DIR holds the `minatar` package (see gen_tables.py). For each game, with
MinAtar's defaults (sticky actions 0.1, ramping on, all six actions), the
loop calls env.act(a) with uniformly random actions drawn beforehand and
env.reset() when an episode ends, as BenchmarkStep does; it is timed once
without and once with env.state() after every act (herd's Step returns the
observation, so the second is the like-for-like figure). Both wall time and
process CPU time per step are printed; on shared cores the CPU time is the
steadier figure, as BenchmarkStep's cpu-ns/op.
"""

import argparse
import os
import random
import sys
import time


def run(Environment, game, steps, with_state):
    env = Environment(game)
    env.seed(1)
    env.reset()
    rnd = random.Random(1)
    acts = [rnd.randrange(6) for _ in range(4096)]
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(steps):
        _, terminal = env.act(acts[i & 4095])
        if with_state:
            env.state()
        if terminal:
            env.reset()
    return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minatar", required=True)
    ap.add_argument("--steps", type=int, default=50000)
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.minatar))
    from minatar import Environment

    for game in ["asterix", "breakout", "freeway", "seaquest", "space_invaders"]:
        act, act_cpu = run(Environment, game, args.steps, False)
        both, both_cpu = run(Environment, game, args.steps, True)
        print(f"{game:15s} act {act * 1e9:7.0f} ns/step ({act_cpu * 1e9:7.0f} cpu-ns)"
              f"   act+state {both * 1e9:7.0f} ns/step ({both_cpu * 1e9:7.0f} cpu-ns)")


if __name__ == "__main__":
    main()
