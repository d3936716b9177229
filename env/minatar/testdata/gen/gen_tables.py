"""Generates env/minatar/testdata/<game>.json.gz: episodes of MinAtar's own
games, run from MinAtar's source, for herd's exactness test.

    /usr/bin/python3 gen_tables.py --minatar DIR [--out ..]

DIR holds the `minatar` package of MinAtar 1.0.15 (github.com/kenjyoung/MinAtar
at commit 4241f24685622cfb52f843cab9bbcf385a53484a, whose setup.py says
version 1.0.15; its games are unchanged since the commit that set that
version). MinAtar is not vendored here: this script imports it from DIR and
uses it only as a black box. NumPy is Debian's python3-numpy; matplotlib and
seaborn are not needed (MinAtar only logs that it cannot render).

Each case builds minatar.Environment(game) with its defaults (sticky action
probability 0.1, difficulty ramping on), seeds it once with env.seed(seed)
and plays several episodes in a row on that one stream: env.reset(), then
env.act(a) until terminal, then the next env.reset() without reseeding, as a
training loop does. Actions are indices into the case's action set (all six
actions for the -v0 ids, minimal_action_set() for -v1), drawn from a
separate RandomState(ACTION_SEED + seed) so that they do not disturb the
environment's stream: uniformly ("random" cases), or from a crude player
that reads the game's state, with a random action a tenth of the time (never in SpaceInvaders)
("greedy" cases), so that the tables reach cleared walls and waves, surfacing
with divers and difficulty ramps. Every observation env.state() (shape [10, 10, C],
flattened row-major and packed 8 cells a byte, most significant bit first,
as hex), every reward and terminal flag and the difficulty ramp index are
recorded.

seaquest_scenarios.json.gz holds a few Seaquest states that played
episodes do not reach (SEAQUEST_SCENARIOS), set by hand on MinAtar's game
after reset and then played with fixed actions; the state set, every
observation, reward and terminal flag are recorded.
"""

import argparse
import copy
import gzip
import json
import os
import sys

import numpy as np

GAMES = ["breakout", "asterix", "freeway", "seaquest", "space_invaders"]
ACTION_SEED = 1000
# (seed, minimal action set, episodes, policy)
CASES = [(0, False, 4, "random"), (1, False, 4, "random"), (2, False, 4, "random"),
         (3, True, 4, "random"), (4, True, 4, "random"),
         (5, False, 2, "greedy"), (6, False, 2, "greedy"), (7, True, 2, "greedy"),
         (8, False, 3, "greedy"), (9, True, 3, "greedy")]
# Seeds found with --seeds that reach rules the cases above do not (see
# the comments); herd's test fails on them when the rule is broken.
EXTRA_CASES = {
    # Seeds 105 and 114 clear a wave of aliens (a difficulty ramp).
    "space_invaders": [(105, True, 1, "greedy"), (114, False, 1, "greedy")],
}
# Freeway episodes always last 2,500 steps: fewer of them.
FREEWAY_CASES = [(0, False, 2, "random"), (1, True, 1, "random"), (5, False, 1, "greedy"),
                 (7, True, 1, "greedy")]
MAX_STEPS = 20000
# A greedy case takes a random action with this probability (none in
# SpaceInvaders, where the sticky actions alone are hard enough to survive).
GREEDY_EPS = {"space_invaders": 0.0}
DEFAULT_GREEDY_EPS = 0.1

N, L, U, R, D, F = range(6)


def lookahead(g, a, depth):
    g = copy.deepcopy(g)
    r, terminal = g.act(a)
    if terminal:
        return -100
    if depth == 1:
        # A bullet falling in the cannon's column is a risk: a sticky
        # action may keep the cannon there.
        return r - g.e_bullet_map[:, g.pos].any()
    return r + 0.9 * max(lookahead(g, b, depth - 1) for b in (N, L, R, F))


def greedy_action(game, g):
    """A crude player that reads the game's state, so that episodes reach
    what random play rarely does (cleared walls and waves, surfacing with
    divers, difficulty ramps). It only chooses actions."""
    if game == "breakout":
        # Follow the ball to the column where it will reach row 8.
        x, y, d = g.ball_x, g.ball_y, g.ball_dir
        for _ in range(30):
            if y == 8 and d in (2, 3):
                break
            dx, dy = ((-1, -1), (1, -1), (1, 1), (-1, 1))[d]
            if not 0 <= x + dx <= 9:
                d, dx = (1, 0, 3, 2)[d], 0
            if y + dy < 0 or g.brick_map[y + dy, x + dx]:
                d, dy = (3, 2, 1, 0)[d], 0
            x, y = x + dx, y + dy
        if x < g.pos:
            return L
        return R if x > g.pos else N
    if game == "freeway":
        return U
    if game == "space_invaders":
        # The aliens draw nothing at random: look two frames ahead on
        # copies of the game, then shoot at the nearest column.
        cols = [c for c in range(10) if g.alien_map[:, c].any()]
        c = min(cols, key=lambda c: abs(c - g.pos)) if cols else g.pos
        want = F if c == g.pos and g.shot_timer == 0 else L if c < g.pos else R if c > g.pos else N
        return max((N, L, R, F), key=lambda a: (lookahead(g, a, 2), a == want))
    if game == "asterix":
        best, best_score = N, None
        for a, (dx, dy) in ((N, (0, 0)), (L, (-1, 0)), (U, (0, -1)), (R, (1, 0)), (D, (0, 1))):
            x, y = min(9, max(0, g.player_x + dx)), min(8, max(1, g.player_y + dy))
            score = 0
            for e in g.entities:
                if e is None or e[1] != y:
                    continue
                d = abs(e[0] - x)
                if e[3]:
                    score += 5 - min(d, 5)
                elif d <= 2:
                    score -= 100
            if best_score is None or score > best_score:
                best, best_score = a, score
        return best
    if game == "seaquest":
        if g.diver_count >= 6 or (g.diver_count >= 1 and g.oxygen < 16 + 2 * g.sub_y):
            return U
        for e in g.e_fish + g.e_subs + g.e_bullets:
            if e[1] == g.sub_y and abs(e[0] - g.sub_x) <= 2 and (e[0] > g.sub_x) != e[2]:
                return D if g.sub_y < 8 and g.sub_y > 0 else U
        for e in g.e_fish + g.e_subs:
            if e[1] == g.sub_y and ((e[0] > g.sub_x) == g.sub_or) and g.shot_timer == 0:
                return F
        if g.divers:
            d = min(g.divers, key=lambda d: abs(d[1] - g.sub_y) + abs(d[0] - g.sub_x))
            if d[1] < g.sub_y:
                return U
            if d[1] > g.sub_y:
                return D
            return L if d[0] < g.sub_x else R
        return D if g.sub_y < 4 else N
    raise ValueError(game)


def packed(state):
    return np.packbits(np.asarray(state, dtype=np.uint8).ravel()).tobytes().hex()


def run_case(Environment, game, seed, minimal, episodes, policy):
    env = Environment(game)
    env.seed(seed)
    action_set = env.minimal_action_set() if minimal else list(range(env.num_actions()))
    pick = np.random.RandomState(ACTION_SEED + seed)
    out = []
    for _ in range(episodes):
        env.reset()
        ep = {"obs": [packed(env.state())], "actions": [], "rewards": [],
              "terminals": [], "ramps": []}
        for _ in range(MAX_STEPS):
            a = int(pick.randint(len(action_set)))
            if policy == "greedy" and pick.rand() >= GREEDY_EPS.get(game, DEFAULT_GREEDY_EPS):
                want = greedy_action(game, env.env)
                if want in action_set:
                    a = action_set.index(want)
            r, terminal = env.act(action_set[a])
            ep["actions"].append(a)
            ep["rewards"].append(int(r))
            ep["terminals"].append(bool(terminal))
            ramp = env.env.difficulty_ramp()
            ep["ramps"].append(-1 if ramp is None else int(ramp))
            ep["obs"].append(packed(env.state()))
            if terminal:
                break
        else:
            raise RuntimeError(f"{game} seed {seed}: no terminal in {MAX_STEPS} steps")
        out.append(ep)
    return {"seed": seed, "minimal_action_set": minimal, "action_set": action_set, "policy": policy,
            "episodes": out}


# Seaquest states that no played episode reaches, set by hand on MinAtar's
# game after reset (sticky actions off), then played with fixed actions:
# each names the rule it pins.
SEAQUEST_SCENARIOS = [
    ("a sub destroyed as it moves still fires in that frame",
     {"sub_x": 8, "sub_y": 0, "f_bullets": [[1, 4, True]],
      "e_subs": [[3, 4, False, 0, 0]]}, [0] * 6),
    ("surfacing with six divers pays oxygen times 10 over 200 and leaves -1 divers",
     {"sub_x": 5, "sub_y": 1, "diver_count": 6, "oxygen": 137, "surface": False}, [2, 0, 4, 2, 0]),
]

STATE_FIELDS = ["oxygen", "diver_count", "sub_x", "sub_y", "sub_or", "f_bullets", "e_bullets",
                "e_fish", "e_subs", "divers", "e_spawn_speed", "e_spawn_timer", "d_spawn_timer",
                "move_speed", "ramp_index", "shot_timer", "surface", "terminal"]


def seaquest_scenarios(Environment):
    out = []
    for i, (rule, state, actions) in enumerate(SEAQUEST_SCENARIOS):
        env = Environment("seaquest", sticky_action_prob=0.0)
        env.seed(i)
        env.reset()
        for k, v in state.items():
            setattr(env.env, k, [list(x) for x in v] if isinstance(v, list) else v)
        start = {k: getattr(env.env, k) for k in STATE_FIELDS}
        start = json.loads(json.dumps(start, default=int))
        ep = {"rule": rule, "seed": i, "state": start, "obs": [packed(env.state())],
              "actions": [], "rewards": [], "terminals": []}
        for a in actions:
            r, terminal = env.act(a)
            ep["actions"].append(a)
            ep["rewards"].append(int(r))
            ep["terminals"].append(bool(terminal))
            ep["obs"].append(packed(env.state()))
        out.append(ep)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minatar", required=True, help="directory holding the minatar package")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--games", default=",".join(GAMES))
    ap.add_argument("--seeds", help="A-B: instead of the committed cases, seeds A..B-1 "
                    "(to search for seeds that reach rare rules)")
    ap.add_argument("--policy", default="greedy")
    ap.add_argument("--episodes", type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.minatar))
    from minatar import Environment

    if not args.seeds:
        path = os.path.join(args.out, "seaquest_scenarios.json.gz")
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(json.dumps({"scenarios": seaquest_scenarios(Environment)},
                               separators=(",", ":")).encode())
        print(f"{path}: {len(SEAQUEST_SCENARIOS)} scenarios")
    for game in args.games.split(","):
        cases = FREEWAY_CASES if game == "freeway" else CASES + EXTRA_CASES.get(game, [])
        if args.seeds:
            lo, hi = map(int, args.seeds.split("-"))
            cases = [(s, s % 2 == 1, args.episodes, args.policy) for s in range(lo, hi)]
        shape = Environment(game).state_shape()
        doc = {"game": game, "state_shape": shape, "sticky_action_prob": 0.1,
               "difficulty_ramping": True, "action_seed": ACTION_SEED,
               "numpy": np.__version__,
               "cases": [run_case(Environment, game, *c) for c in cases]}
        path = os.path.join(args.out, game + ".json.gz")
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(json.dumps(doc, separators=(",", ":")).encode())
        steps = sum(len(e["actions"]) for c in doc["cases"] for e in c["episodes"])
        ret = sum(sum(e["rewards"]) for c in doc["cases"] for e in c["episodes"])
        ramp = max(max(e["ramps"]) for c in doc["cases"] for e in c["episodes"])
        print(f"{path}: {steps} steps, total reward {ret}, max ramp {ramp}, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
