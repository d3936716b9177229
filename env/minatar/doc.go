// Package minatar holds exact Go versions of MinAtar's five games (Young &
// Tian 2019, "MinAtar: An Atari-Inspired Testbed for Thorough and
// Reproducible Reinforcement Learning Experiments"), release 1.0.15:
// Asterix, Breakout, Freeway, Seaquest and SpaceInvaders, each behind
// MinAtar's Environment wrapper (sticky actions, difficulty ramping) with
// the Gymnasium interface of minatar.gym.
//
// Most users build them through env.Make with MinAtar's Gymnasium ids:
//
//	MinAtar/Asterix-v0   MinAtar/Breakout-v0   MinAtar/Freeway-v0
//	MinAtar/Seaquest-v0  MinAtar/SpaceInvaders-v0
//
// -v0 takes all six actions (0 no-op, 1 left, 2 up, 3 right, 4 down,
// 5 fire); -v1 the game's minimal set, whose indices map to those six as
// MinAtar's minimal_action_set() does: Asterix {0,1,2,3,4}, Breakout
// {0,1,3}, Freeway {0,2,4}, Seaquest all six, SpaceInvaders {0,1,3,5}.
// MinAtar's keywords pass through env.WithKwargs: sticky_action_prob
// (default 0.1) and difficulty_ramping (default true). As in MinAtar there
// is no time limit; Freeway ends itself after 2,500 frames. New takes a
// Config for the same choices.
//
// # Observations
//
// A Box of shape [10, 10, C] with values 0 and 1, float32, flattened
// row-major as MinAtar's state() array: the value of row y, column x,
// channel c is obs[(y·10 + x)·C + c]. Channels, in MinAtar's order:
//
//   - Asterix (C = 4): player, enemy, trail, gold.
//   - Breakout (C = 4): paddle, ball, trail, brick.
//   - Freeway (C = 7): chicken, car, and the trail of a car that moves
//     every 1, 2, 3, 4 or 5 frames.
//   - Seaquest (C = 10): sub front, sub back, friendly bullet, trail, enemy
//     bullet, enemy fish, enemy sub, oxygen gauge, diver gauge, diver.
//   - SpaceInvaders (C = 6): cannon, alien, alien moving left, alien moving
//     right, friendly bullet, enemy bullet.
//
// The observation slice is owned by the env and updated in place, only in
// the cells that change, so it must not be written to (copy it to keep or
// change it).
//
// # Exactness
//
// MinAtar's wrapper and game share one NumPy RandomState(seed), an MT19937
// stream, and draw from it only with rand() and randint(); package
// internal/nprand reproduces both bit for bit (tested against NumPy's own
// draws). So Reset(seed) followed by the same actions gives exactly the
// episodes MinAtar plays after env.seed(seed) (gym: reset(seed=seed)):
//
//   - every Step draws one rand() for the sticky action (repeat the
//     previous action when it is below sticky_action_prob), then the game
//     draws what its rules need (Asterix and Seaquest spawns, Freeway's car
//     speeds, Breakout's start side at reset);
//   - Reset(NoSeed) continues the stream, as MinAtar's reset() does, and
//     the previous action is kept across episodes and reseeding;
//   - the games keep MinAtar's quirks: Breakout's ball passes into a brick
//     without breaking it right after breaking one; Seaquest surfacing with
//     six divers leaves a diver count of −1 (and later surfacings lower it
//     further); Seaquest's object lists are updated while iterated in
//     reverse, an object is removed as the first equal one, and a sub
//     destroyed in a frame still fires in it; SpaceInvaders' maps roll (a
//     row pushed off the bottom reappears at the top).
//
// TestExactMinAtar replays tables written by MinAtar's own code
// (testdata/gen/gen_tables.py, run on MinAtar's source with Debian's NumPy):
// 135 episodes and 24,443 steps over the five games, full and minimal
// action sets, episodes in a row on one stream, random and scripted
// players; every observation channel, reward, terminal flag and difficulty
// level is equal at every step. The scripted players reach what random
// play does not: cleared Breakout walls, Asterix and Seaquest difficulty
// ramps, Seaquest surfacing with six divers, a cleared SpaceInvaders wave.
// Larger tables of the same kind (about 980,000 steps, among them 3,600
// scripted Seaquest episodes, made with the script's --seeds option)
// replay equally with -minatar.tables DIR.
//
// A sub destroyed in the frame it fires, which no played episode reached,
// is pinned by testdata/seaquest_scenarios.json.gz: states set by hand on
// MinAtar's own Seaquest, then played (TestSeaquestScenarios). Removing
// "the first equal object" is kept as MinAtar does it, though in every
// state we could construct it is the object itself (an equal object would
// share the cell of the bullet that the earlier bullet loop already
// resolved). Two departures, neither reachable in MinAtar: seeds of 2³²
// and above (NumPy rejects them) seed the stream as RandomState([seed mod
// 2³², seed >> 32]); and a Freeway car whose direction draw is exactly 0.5
// (probability 2⁻⁵³) gets speed 0 as in MinAtar, where the first car of
// that kind crashes state() and a later one reuses the previous car's
// trail channel; here the first one has no trail.
//
// # Saved state
//
// Env is an env.Snapshotter: MarshalState holds the game's objects,
// timers and difficulty, the MT19937 stream (its 624 words and position),
// the previous action a sticky step repeats and whether an episode runs,
// so a training run resumed from a checkpoint plays the same frames as
// the run that never stopped. Seaquest's objects are saved by value, in
// list order, which is all its rules read (see above).
//
// # Costs and concurrency
//
// A step allocates nothing. BenchmarkStep times each game's step and
// testdata/gen/bench_minatar.py MinAtar's; docs/BENCHMARKS.md ("MinAtar")
// compares them. An Env is used by one goroutine.
package minatar
