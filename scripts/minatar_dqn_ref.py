"""Runs MinAtar's own examples/dqn.py, unchanged, as a black box for a
side-by-side with herd's DQN (scripts/minatar-dqn-ratio.sh).

    /usr/bin/python3 scripts/minatar_dqn_ref.py --minatar DIR --game breakout \
        --frames 100000 --seed 1 --threads 1 --out FILE.json

DIR is a checkout of github.com/kenjyoung/MinAtar (its `minatar` package
and examples/). examples/dqn.py takes no seed and a fixed NUM_FRAMES: this
wrapper imports it, sets NUM_FRAMES, seeds Python's, NumPy's and torch's
generators and the game (Environment.seed(SEED)), calls its dqn()
and writes the per-episode returns with their frame stamps and the wall
time as JSON. Nothing else of dqn.py is changed, so its ε schedule (1 → 0.1
over FIRST_N_FRAMES = 100000 after REPLAY_START_SIZE uniform frames)
stays as published.
"""

import argparse
import importlib.util
import json
import os
import random
import sys
import tempfile
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--minatar", required=True)
    p.add_argument("--game", default="breakout")
    p.add_argument("--frames", type=int, default=100000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()

    sys.path.insert(0, os.path.abspath(a.minatar))
    import numpy
    import torch

    torch.set_num_threads(a.threads)
    spec = importlib.util.spec_from_file_location("minatar_dqn", os.path.join(a.minatar, "examples", "dqn.py"))
    dqn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dqn)
    dqn.NUM_FRAMES = a.frames
    random.seed(a.seed)
    numpy.random.seed(a.seed)
    torch.manual_seed(a.seed)
    env = dqn.Environment(a.game)
    env.seed(a.seed)

    with tempfile.TemporaryDirectory() as d:
        prefix = os.path.join(d, a.game)
        t0 = time.perf_counter()
        dqn.dqn(env, False, False, prefix)
        wall = time.perf_counter() - t0
        data = torch.load(prefix + "_data_and_weights")
    with open(a.out, "w") as f:
        json.dump({"game": a.game, "seed": a.seed, "frames": a.frames, "threads": a.threads,
                   "wall_s": wall, "frames_per_s": a.frames / wall,
                   "returns": [float(g) for g in data["returns"]],
                   "frame_stamps": [int(t) for t in data["frame_stamps"]]}, f)


if __name__ == "__main__":
    main()
