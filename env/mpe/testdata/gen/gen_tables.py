"""Generates env/mpe/testdata/*.json.gz: transition tables of PettingZoo
1.24.3's MPE environments, run from PettingZoo's own source.

    /usr/bin/python3 gen_tables.py --pettingzoo DIR [--out ..]

DIR holds the `pettingzoo` package of the 1.24.3 release (git archive 1.24.3
pettingzoo of github.com/Farama-Foundation/PettingZoo, commit
e62d6bcdc6e0c28fa19c08545a63dc8370393495). Gymnasium is not needed: the
`gymnasium` directory beside this script is a minimal stand-in for the few
names PettingZoo imports (spaces, seeding, EzPickle, logger), none of which
takes part in the dynamics. NumPy and pygame (which the MPE module imports)
are Debian's.

Each table holds whole episodes of the parallel env (parallel_env(**kwargs)).
Because herd's resets draw from herd's own random streams, every episode
records the world state PettingZoo's reset produced (agent and landmark
positions, and for simple_reference the goal landmark of each agent); the Go
test sets that state and then replays the recorded actions. Every step
records the actions, the float64 observation of each agent (before the
float32 cast PettingZoo applies), the rewards, terminations, truncations,
the agents left, and the world state after the step (positions, velocities
and communication of every agent).
"""

import argparse
import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [
    # name, module, kwargs, steps (whole episodes until at least this many)
    ("simple_spread_v3_discrete", "simple_spread_v3", {}, 1000),
    ("simple_spread_v3_continuous", "simple_spread_v3",
     {"N": 4, "local_ratio": 0.25, "max_cycles": 20, "continuous_actions": True}, 500),
    ("simple_tag_v3_discrete", "simple_tag_v3", {}, 1000),
    ("simple_tag_v3_continuous", "simple_tag_v3",
     {"num_good": 2, "num_adversaries": 2, "num_obstacles": 3, "max_cycles": 30,
      "continuous_actions": True}, 500),
    ("simple_reference_v3_discrete", "simple_reference_v3", {}, 1000),
    ("simple_reference_v3_continuous", "simple_reference_v3",
     {"local_ratio": 0.8, "max_cycles": 40, "continuous_actions": True}, 500),
]


def floats(a):
    return [float(x) for x in a]


def world_state(world):
    return {
        "pos": [floats(a.state.p_pos) for a in world.agents],
        "vel": [floats(a.state.p_vel) for a in world.agents],
        "comm": [floats(a.state.c) for a in world.agents],
    }


def run_case(name, module, kwargs, steps, seed):
    import importlib

    import numpy as np

    mod = importlib.import_module("pettingzoo.mpe." + module)
    env = mod.parallel_env(**kwargs)
    raw = env.aec_env.unwrapped
    world, scenario = raw.world, raw.scenario
    rng = np.random.default_rng(seed)
    episodes = []
    total = 0
    ep = 0
    while total < steps:
        obs, _ = env.reset(seed=seed * 1000 + ep)
        reset = {
            "agents_pos": [floats(a.state.p_pos) for a in world.agents],
            "landmarks_pos": [floats(l.state.p_pos) for l in world.landmarks],
            "obs": {
                a.name: floats(scenario.observation(a, world)) for a in world.agents
            },
        }
        if module == "simple_reference_v3":
            reset["goals"] = [world.landmarks.index(a.goal_b) for a in world.agents]
        for a in world.agents:
            o32 = scenario.observation(a, world).astype(np.float32)
            assert np.array_equal(o32, obs[a.name])
        steps_out = []
        while env.agents:
            actions = {}
            table_actions = {}
            for agent in env.agents:
                space = env.action_space(agent)
                if kwargs.get("continuous_actions"):
                    # Some values outside [0, 1]: PettingZoo clips them.
                    a = rng.uniform(-0.2, 1.2, space.shape).astype(np.float32)
                    actions[agent] = a
                    table_actions[agent] = floats(a)
                else:
                    a = int(rng.integers(0, space.n))
                    actions[agent] = a
                    table_actions[agent] = [a]
            obs, rew, term, trunc, _ = env.step(actions)
            rec = {
                "actions": table_actions,
                "obs": {
                    a.name: floats(scenario.observation(a, world))
                    for a in world.agents
                    if a.name in obs
                },
                "rewards": {k: float(v) for k, v in rew.items()},
                "terminations": term,
                "truncations": trunc,
                "agents": list(env.agents),
                "state": world_state(world),
            }
            for a in world.agents:
                if a.name in obs:
                    o32 = scenario.observation(a, world).astype(np.float32)
                    assert np.array_equal(o32, obs[a.name])
            steps_out.append(rec)
            total += 1
        episodes.append({"seed": seed * 1000 + ep, "reset": reset, "steps": steps_out})
        ep += 1
    env.close()
    return {
        "name": name,
        "env": module,
        "kwargs": kwargs,
        "pettingzoo": "1.24.3",
        "numpy": np.__version__,
        "possible_agents": list(env.possible_agents),
        "episodes": episodes,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pettingzoo", required=True, help="directory holding the pettingzoo package")
    ap.add_argument("--out", default=os.path.dirname(HERE))
    args = ap.parse_args()
    sys.path.insert(0, HERE)  # the gymnasium stand-in
    sys.path.insert(1, os.path.abspath(args.pettingzoo))
    import pettingzoo

    assert pettingzoo.__version__ == "1.24.3", pettingzoo.__version__
    from pettingzoo.utils.env_logger import EnvLogger

    EnvLogger.suppress_output()  # one clipping warning per out-of-range action
    for i, (name, module, kwargs, steps) in enumerate(CASES):
        table = run_case(name, module, kwargs, steps, seed=i + 1)
        path = os.path.join(args.out, name + ".json.gz")
        data = json.dumps(table, separators=(",", ":")).encode()
        with open(path, "wb") as f:
            # mtime=0: the same tables give the same bytes.
            with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
                g.write(data)
        n = sum(len(e["steps"]) for e in table["episodes"])
        nz = sum(1 for e in table["episodes"] for s in e["steps"] for r in s["rewards"].values() if r != 0)
        print(f"{name}: {len(table['episodes'])} episodes, {n} steps, {nz} nonzero rewards, "
              f"{os.path.getsize(path)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
