"""Serves a multi-agent env with PettingZoo's Parallel API to herd over
herd.v1's multi-agent sessions (OpenRequest.parallel).

Any object works that has possible_agents, agents, observation_space(agent),
action_space(agent), reset(seed=None) -> (obs, infos) (or obs alone, as
older PettingZoo) and step(actions) -> (obs, rewards, terminations,
truncations, infos), every value a dict keyed by agent name; no PettingZoo
import is needed. herd_env.serve picks this server by itself when --env
makes such an object:

    python3 -m herd_env.serve --env pettingzoo.mpe:simple_spread_v3.parallel_env --port 7000

and herd reaches it as grpc://127.0.0.1:7000/ID (Describe lists ID among
parallel_env_ids, so herd treats it as a multi-agent id: rows of agents in
MakeVector, a Parallel in MakeParallel).

Each session holds num_envs envs and answers one message per reset or step
for all of them. Every env's action map is checked before any env steps:
exactly one action per agent in the env's agents, each in its space (a Box
action must be finite); a bad one is answered in-band with INVALID_ACTION.
With autoreset, an env whose agents have all left is reset in the same step.

Each answer carries, per agent, the part of its info herd reads: PettingZoo's
info["action_mask"] (one entry per action of a Discrete action space, nonzero
when legal), the reset's infos for the first observations of an episode. When
the session asks for it (OpenRequest.global_state) and the env has PettingZoo's
state() and state_space (a Box), the answer describes state_space and every
env's batch carries state() with its observations (and at an autoreset the
ending episode's as final_state).
With --shm the same messages are framed on the shm socket (herd_env.shm;
no shared segment), as herd serve env's Go server does.
"""

import grpc

from . import PROTOCOL_VERSION
from ._proto.herd.v1 import env_pb2
from .serve import EnvServicer, _close_envs, _make_envs, _status
from .spaces import Codec, flatten


def is_parallel(obj):
    """Whether obj looks like a PettingZoo Parallel env."""
    return hasattr(obj, "possible_agents") and callable(getattr(obj, "observation_space", None)) \
        and callable(getattr(obj, "action_space", None))


def _reset(e, seed):
    """e.reset(seed=seed) as (obs, infos): older PettingZoo returns obs
    alone."""
    r = e.reset(seed=seed)
    if isinstance(r, tuple):
        return r[0], (r[1] if len(r) > 1 else {})
    return r, {}


def _state_codec(e):
    """The Codec of e's global state space (PettingZoo's state_space, with
    state()), or None when e has none. A state space that is no Box is an
    error."""
    try:
        space = getattr(e, "state_space", None)
    except Exception:  # a wrapper's property that finds no state space
        space = None
    if space is None or not callable(getattr(e, "state", None)):
        return None
    codec = Codec(space)
    if codec.kind != "Box":
        raise ValueError("state_space %r is not a Box" % (space,))
    return codec


class _ParallelSession:
    """One stream's multi-agent envs, stepped in the stream's thread."""

    def __init__(self, factory, open_req):
        n = open_req.num_envs
        self.envs = _make_envs(factory, n)
        e = self.envs[0]
        self.possible = [str(a) for a in e.possible_agents]
        self.obs_codecs = {a: Codec(e.observation_space(a)) for a in self.possible}
        self.act_codecs = {a: Codec(e.action_space(a)) for a in self.possible}
        self.autoreset = open_req.autoreset
        self.running = [False] * n
        self.state_codec = _state_codec(e) if open_req.global_state else None

    def close(self):
        _close_envs(self.envs)

    def open_response(self):
        spaces = env_pb2.ParallelSpaces(agents=[
            env_pb2.AgentSpaces(agent=a, observation_space=self.obs_codecs[a].to_proto(),
                                action_space=self.act_codecs[a].to_proto())
            for a in self.possible])
        if self.state_codec is not None:
            spaces.state_space.CopyFrom(self.state_codec.to_proto())
        return env_pb2.EnvResponse(open=env_pb2.OpenResponse(num_envs=len(self.envs), parallel=spaces))

    def _fill_obs(self, dst, obs):
        """Writes obs (agent -> observation) into the map field dst, flat."""
        for a, o in obs.items():
            codec = self.obs_codecs.get(a)
            if codec is None:
                raise ValueError("observation of agent %r, not in possible_agents" % (a,))
            flat = flatten(o)
            if len(flat) != codec.dim:
                raise ValueError("agent %s observation has %d values, its space %d" % (a, len(flat), codec.dim))
            dst[a].values.extend(flat)

    def _fill_infos(self, dst, infos, agents):
        """Writes the action masks of agents' infos into the map field dst;
        an agent without one is left out."""
        for a in agents:
            info = infos.get(a) if isinstance(infos, dict) else None
            mask = info.get("action_mask") if isinstance(info, dict) else None
            if mask is None:
                continue
            codec = self.act_codecs[a]
            flat = flatten(mask)
            if codec.kind != "Discrete" or len(flat) != codec.n:
                raise ValueError("agent %s: action_mask of %d values for a %s action space of %d"
                                 % (a, len(flat), codec.kind, getattr(codec, "n", codec.dim)))
            dst[a].action_mask.extend(v != 0 for v in flat)

    def _fill_state(self, dst, e):
        """Appends e.state() to the repeated field dst when the session
        sends the global state."""
        if self.state_codec is None:
            return
        flat = flatten(e.state())
        if len(flat) != self.state_codec.dim:
            raise ValueError("state() has %d values, state_space %d" % (len(flat), self.state_codec.dim))
        dst.extend(flat)

    def reset(self, seeds):
        n = len(self.envs)
        if seeds and len(seeds) != n:
            return None, "reset with %d seeds for %d envs" % (len(seeds), n)
        batch = env_pb2.ParallelBatch()
        try:
            for i, e in enumerate(self.envs):
                self.running[i] = False
                seed = seeds[i] if seeds and seeds[i] >= 0 else None
                obs, infos = _reset(e, seed)
                eb = batch.envs.add()
                self._fill_obs(eb.obs, obs)
                eb.agents.extend(str(a) for a in e.agents)
                self._fill_infos(eb.infos, infos, e.agents)
                self._fill_state(eb.state, e)
                self.running[i] = bool(e.agents)
        except Exception as ex:  # the env's own failure
            return _status(grpc.StatusCode.INTERNAL, "ENV_ERROR", "reset: %r" % (ex,)), None
        return env_pb2.EnvResponse(parallel_batch=batch), None

    def _env_actions(self, i, e, req):
        """Checks env i's action map; returns (actions for e.step, None) or
        (None, why)."""
        live = [str(a) for a in e.agents]
        got = dict(req.actions)
        for a in got:
            if a not in live:
                return None, "action for agent %r, which is not in the episode (agents %s)" % (a, live)
        out = {}
        for a in live:
            if a not in got:
                return None, "no action for agent %r" % (a,)
            codec = self.act_codecs[a]
            vals = list(got[a].values)
            why = codec.check(vals)
            if why is not None:
                return None, "agent %s: %s" % (a, why)
            out[a] = codec.to_env(vals)
        return out, None

    def step(self, envs):
        n = len(self.envs)
        if len(envs) != n:
            return _status(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ACTION",
                           "%d envs want %d action maps, got %d" % (n, n, len(envs)))
        if not all(self.running):
            i = self.running.index(False)
            return _status(grpc.StatusCode.FAILED_PRECONDITION, "NEEDS_RESET",
                           "env %d: step before reset or after the episode ended" % i)
        actions = []
        for i, e in enumerate(self.envs):  # check all before stepping any
            acts, why = self._env_actions(i, e, envs[i])
            if why is not None:
                return _status(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ACTION", "env %d: %s" % (i, why))
            actions.append(acts)
        batch = env_pb2.ParallelBatch()
        try:
            for i, e in enumerate(self.envs):
                obs, rew, term, trunc, infos = e.step(actions[i])
                eb = batch.envs.add()
                self._fill_infos(eb.infos, infos, actions[i])
                for a in actions[i]:
                    t = eb.transitions[a]
                    t.reward = float(rew.get(a, 0.0))
                    t.terminated = bool(term.get(a, False))
                    t.truncated = bool(trunc.get(a, False))
                if not e.agents:
                    self.running[i] = False
                    if self.autoreset:
                        eb.done = True
                        self._fill_obs(eb.final_obs, obs)
                        self._fill_state(eb.final_state, e)
                        obs, infos = _reset(e, None)
                        self._fill_infos(eb.reset_infos, infos, e.agents)
                        self.running[i] = bool(e.agents)
                self._fill_obs(eb.obs, obs)
                eb.agents.extend(str(a) for a in e.agents)
                self._fill_state(eb.state, e)
        except Exception as ex:
            return _status(grpc.StatusCode.INTERNAL, "ENV_ERROR", "step: %r" % (ex,))
        return env_pb2.EnvResponse(parallel_batch=batch)


class ParallelEnvServicer(EnvServicer):
    """herd.v1 EnvService over a factory of PettingZoo Parallel envs: the
    session loop is EnvServicer's; opening and answering are its own."""

    parallel = True  # herd_env.shm frames its sessions' messages, no segment

    def Describe(self, request, context):
        return env_pb2.DescribeResponse(protocol_versions=[PROTOCOL_VERSION], parallel_env_ids=[self.env_id],
                                        server="herd_env (python)")

    def open(self, first):
        if first.WhichOneof("msg") != "open":
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "the first message of a session must be open")
        op = first.open
        if op.protocol_version != PROTOCOL_VERSION:
            return None, (grpc.StatusCode.FAILED_PRECONDITION,
                          "protocol version %d; this server speaks %d" % (op.protocol_version, PROTOCOL_VERSION))
        if op.env_id != self.env_id:
            return None, (grpc.StatusCode.NOT_FOUND, "env id %r; this server serves %r" % (op.env_id, self.env_id))
        if not op.parallel:
            return None, (grpc.StatusCode.INVALID_ARGUMENT,
                          "env %r is multi-agent (PettingZoo Parallel API): open it with parallel = true" % self.env_id)
        if op.max_episode_steps != 0:
            return None, (grpc.StatusCode.INVALID_ARGUMENT,
                          "max_episode_steps %d: a multi-agent env keeps its own limit; send 0" % op.max_episode_steps)
        if not 0 < op.num_envs <= self.max_envs:
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "num_envs %d, want 1..%d" % (op.num_envs, self.max_envs))
        try:
            return _ParallelSession(self.factory, op), None
        except Exception as ex:
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "making the env: %r" % (ex,))

    @staticmethod
    def handle(sess, req):
        kind = req.WhichOneof("msg")
        if kind == "parallel_step":
            return sess.step(req.parallel_step.envs), None
        if kind == "reset":
            return sess.reset(list(req.reset.seeds))
        if kind == "state":
            return _status(grpc.StatusCode.UNIMPLEMENTED, "UNSUPPORTED", "multi-agent envs have no state access"), None
        if kind == "step":
            return None, "a single-agent step in a multi-agent session (send parallel_step)"
        if kind == "open":
            return None, "open sent twice in one session"
        return None, "empty request"


def servicer_for(factory, env_id, max_envs, max_sessions=None):
    """Returns the servicer for the envs factory makes: ParallelEnvServicer
    when one made now has PettingZoo's Parallel API, else EnvServicer."""
    probe = factory()
    try:
        parallel = is_parallel(probe)
    finally:
        _close_envs([probe])
    if parallel:
        return ParallelEnvServicer(factory, env_id, max_envs, max_sessions)
    return EnvServicer(factory, env_id, max_envs, max_sessions)
