"""Replays the PettingZoo 1.24.3 tables (../*.json.gz) on MPE2's code, to
say whether MPE2 steps the same worlds the same way:

    /usr/bin/python3 check_mpe2.py --mpe2 DIR --pettingzoo DIR

DIR of --mpe2 holds the mpe2 package (github.com/Farama-Foundation/MPE2);
--pettingzoo a pettingzoo package MPE2 can import (it needs
pettingzoo.utils.agent_selector.AgentSelector, which 1.24.3 names
agent_selector; an alias is enough). After each reset the recorded world
is set (positions; simple_reference's goals), the recorded actions are
fed, and every observation and reward is compared at 1e-12.
"""

import argparse
import glob
import gzip
import importlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpe2", required=True)
    ap.add_argument("--pettingzoo", required=True)
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    sys.path.insert(1, os.path.abspath(args.pettingzoo))
    sys.path.insert(2, os.path.abspath(args.mpe2))
    import numpy as np
    from pettingzoo.utils.env_logger import EnvLogger

    EnvLogger.suppress_output()
    worst = 0.0
    for path in sorted(glob.glob(os.path.join(os.path.dirname(HERE), "*.json.gz"))):
        with gzip.open(path) as f:
            tb = json.load(f)
        mod = importlib.import_module("mpe2." + tb["env"])
        env = mod.parallel_env(**tb["kwargs"])
        raw = env.aec_env.unwrapped
        world, scenario = raw.world, raw.scenario
        steps = 0
        for ep in tb["episodes"]:
            env.reset(seed=ep["seed"])
            r = ep["reset"]
            for a, p in zip(world.agents, r["agents_pos"]):
                a.state.p_pos = np.array(p)
                a.state.p_vel = np.zeros(2)
                a.state.c = np.zeros(world.dim_c)
            for l, p in zip(world.landmarks, r["landmarks_pos"]):
                l.state.p_pos = np.array(p)
            if "goals" in r:
                for a, g in zip(world.agents, r["goals"]):
                    a.goal_b = world.landmarks[g]
                world.agents[0].goal_a = world.agents[1]
                world.agents[1].goal_a = world.agents[0]
            for s in ep["steps"]:
                acts = {}
                for a, v in s["actions"].items():
                    acts[a] = np.array(v, dtype=np.float32) if tb["kwargs"].get("continuous_actions") else int(v[0])
                _, rew, term, trunc, _ = env.step(acts)
                for a in world.agents:
                    got = scenario.observation(a, world)
                    want = np.array(s["obs"][a.name])
                    worst = max(worst, float(np.max(np.abs(got - want))))
                    worst = max(worst, abs(rew[a.name] - s["rewards"][a.name]))
                    if trunc[a.name] != s["truncations"][a.name]:
                        raise SystemExit(f"{tb['name']}: truncation differs")
                steps += 1
        print(f"{tb['name']}: {steps} steps replayed, largest difference so far {worst:.3g}")
    print("MPE2 matches PettingZoo 1.24.3 at 1e-12" if worst <= 1e-12 else f"MPE2 differs: {worst}")


if __name__ == "__main__":
    main()
