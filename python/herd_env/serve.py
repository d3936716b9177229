"""Serves a Gymnasium-style env to herd over gRPC (herd.v1 EnvService).

    python3 -m herd_env.serve --env module:Class [--kwargs JSON] [--id NAME]
        [--host 127.0.0.1] --port P [--shm NAME] [--procs K] [--max-envs 4096]
        [--max-sessions 64] [--tls-cert F --tls-key F [--tls-client-ca F]]
        [--grpc-impl grpcio|h2]

--env names a class or function that returns an env: an object with
observation_space, action_space, reset(seed=None) -> (obs, info) and
step(action) -> (obs, reward, terminated, truncated, info), or a multi-agent
env with PettingZoo's Parallel API (served by herd_env.parallel). For Gymnasium's
own envs: --env gymnasium:make --kwargs '{"id": "CartPole-v1"}'. Each session
builds num_envs envs with it and steps them in one message; herd connects
with --env grpc://HOST:PORT/NAME, NAME being --id (default: the class or
function name, or kwargs["id"] when given). With --shm NAME it also serves
clients on the same host through shared memory (herd connects with
--env shm://NAME/ID; see herd_env.shm); --port 0 picks a free port, and
--port -1 serves shared memory only. --procs K runs shm sessions, and
gRPC ones with --grpc-impl h2, in K worker processes (herd_env.procs):
a vector's ?inflight=K then steps its envs in K processes at once.

Errors the session survives (an action outside the space, a step that needs
a reset, an exception from the env) are answered in-band with a Status; a
malformed session (no open first, a wrong protocol version, too many envs)
is ended with INVALID_ARGUMENT or FAILED_PRECONDITION. Other sessions are
not affected.
"""

import argparse
import importlib
import json
import math
import os
import signal
import sys
import threading
from concurrent import futures

import grpc

from . import PROTOCOL_VERSION, stepwire
from ._proto.herd.v1 import env_pb2, env_pb2_grpc
from .spaces import Codec, flatten
from .spaces import _np

# NumPy's array type for the flat-observation fast path; a type no
# observation has when NumPy is missing.
_ndarray = _np.ndarray if _np is not None else type("_NoNdarray", (), {})
_f32 = _np.dtype(_np.float32) if _np is not None else None

# From this many observation values on, step_lists copies float32
# observations into the shm segment with NumPy (one assignment per env,
# about 0.25 µs plus the copy); below it, tolist and one struct pack per
# message cost less.
_ROWS_MIN_DIM = 16

MAX_MESSAGE_BYTES = 64 << 20

# Calls a server takes beyond its sessions: a client's Describe is answered
# before its session opens, but the transport counts the call as live until
# its handler has returned, which can be after the client has the answer and
# has opened its session. Without room for these, a client under the session
# limit could be refused for its own Describe.
UNARY_HEADROOM = 8


def load_factory(spec, kwargs):
    """Returns a function making one env from "module:attr" and kwargs."""
    mod, sep, attr = spec.partition(":")
    if not sep or not mod or not attr:
        raise ValueError("--env %r: want module:Class" % spec)
    obj = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return lambda: obj(**kwargs)


def _status(code, reason, message):
    return env_pb2.EnvResponse(error=env_pb2.Status(code=code.value[0], reason=reason, message=message))


def _unwrapped(e):
    return getattr(e, "unwrapped", e)


def _make_envs(factory, n):
    """n envs from factory; the ones made are closed if one fails."""
    envs = []
    try:
        for _ in range(n):
            envs.append(factory())
    except Exception:
        _close_envs(envs)
        raise
    return envs


def _close_envs(envs):
    """Closes each env that has a close method, ignoring its errors."""
    for e in envs:
        close = getattr(e, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass


def _batch_response(r):
    """The EnvResponse of step_lists' lists r."""
    # Filled in place: Batch(obs=...) inside EnvResponse(batch=...)
    # builds the batch and then copies it (twice the time).
    resp = env_pb2.EnvResponse()
    b = resp.batch
    b.obs.extend(r[0])
    b.rewards.extend(r[1])
    b.terminated.extend(r[2])
    b.truncated.extend(r[3])
    if r[4]:
        b.final_obs.extend(r[4])
    return resp


class _Session:
    """One stream's envs, stepped in the stream's thread."""

    def __init__(self, factory, open_req):
        n = open_req.num_envs
        self.envs = _make_envs(factory, n)
        self.obs_codec = Codec(self.envs[0].observation_space)
        self.act_codec = Codec(self.envs[0].action_space)
        self.autoreset = open_req.autoreset
        self.max_steps = open_req.max_episode_steps  # > 0: ours; 0 or < 0: the env's own
        self.elapsed = [0] * n
        self.running = [False] * n
        # step_lists copies observations into a shm segment with NumPy: float32 arrays (as env
        # 0's reset gave) of at least _ROWS_MIN_DIM values; set by reset.
        self.rows_path = False
        self.batcher = stepwire.Batcher()
        # u8: observations travel as bytes (the client asked, the space is
        # a uint8 Box); lives: the envs' infos hold ALE's "lives" (seen at
        # reset). Either sends steps through step_plain.
        self.u8 = open_req.obs_u8 and self.obs_codec.u8
        self.lives = False

    def close(self):
        _close_envs(self.envs)

    def open_response(self):
        u = _unwrapped(self.envs[0])
        has_state = hasattr(u, "state")
        if not has_state:
            # Gymnasium's Pendulum and MountainCar make `state` in reset:
            # reset one env to see. The client resets before stepping
            # anyway (running is False), and a reset with a seed reseeds.
            try:
                self.envs[0].reset()
                has_state = hasattr(u, "state")
            except Exception:
                pass
        meanings = getattr(u, "get_action_meanings", None)
        try:
            meanings = [str(m) for m in meanings()] if meanings is not None else []
        except Exception:
            meanings = []
        return env_pb2.EnvResponse(open=env_pb2.OpenResponse(
            observation_space=self.obs_codec.to_proto(), action_space=self.act_codec.to_proto(),
            num_envs=len(self.envs), has_state=has_state, obs_u8=self.u8, action_meanings=meanings))

    def _obs(self, obs, out):
        """Appends obs, flat, to the list out."""
        if type(obs) is list and len(obs) == self.obs_codec.dim and all(type(v) is float for v in obs):
            out.extend(obs)  # the common flat case, without a copy per value
            return
        if type(obs) is _ndarray and obs.shape == (self.obs_codec.dim,) and obs.dtype.kind == "f":
            out.extend(obs.tolist())  # a flat float array: tolist gives Python floats already
            return
        flat = flatten(obs)
        if len(flat) != self.obs_codec.dim:
            raise ValueError("observation has %d values, the space %d" % (len(flat), self.obs_codec.dim))
        out.extend(flat)

    def reset(self, seeds):
        n = len(self.envs)
        if seeds and len(seeds) != n:
            return None, "reset with %d seeds for %d envs" % (len(seeds), n)
        obs, obs_u8, lives = [], bytearray(), []
        try:
            for i, e in enumerate(self.envs):
                seed = seeds[i] if seeds and seeds[i] >= 0 else None
                o, info = e.reset(seed=seed)
                if i == 0:
                    self.rows_path = (type(o) is _ndarray and o.dtype is _f32
                                      and self.obs_codec.dim >= _ROWS_MIN_DIM)
                    self.lives = isinstance(info, dict) and "lives" in info
                if self.u8:
                    obs_u8 += self._bytes(o)
                else:
                    self._obs(o, obs)
                if self.lives:
                    lives.append(int(info["lives"]))
                self.elapsed[i], self.running[i] = 0, True
        except Exception as ex:  # the env's own failure
            return _status(grpc.StatusCode.INTERNAL, "ENV_ERROR", "reset: %r" % (ex,)), None
        return env_pb2.EnvResponse(batch=env_pb2.Batch(obs=obs, obs_u8=bytes(obs_u8), lives=lives)), None

    def _bytes(self, o):
        """A uint8 observation's bytes, checked against the space."""
        b = o.tobytes() if type(o) is _ndarray and o.dtype.name == "uint8" else bytes(int(v) for v in flatten(o))
        if len(b) != self.obs_codec.dim:
            raise ValueError("observation has %d values, the space %d" % (len(b), self.obs_codec.dim))
        return b

    def step(self, actions):
        if self.u8 or self.lives:
            return self.step_plain(actions)
        r = self.step_lists(actions)
        if type(r) is not tuple:
            return r
        return _batch_response(r)

    def step_wire(self, actions):
        """step, answered as a serialized EnvResponse, written by
        stepwire rather than through protobuf's objects."""
        if self.u8 or self.lives:
            return self.step_plain(actions).SerializeToString()
        r = self.step_lists(actions)
        if type(r) is not tuple:
            return r.SerializeToString()
        b = self.batcher.batch(*r)
        return b if b is not None else _batch_response(r).SerializeToString()

    def step_plain(self, actions):
        """step for sessions whose answers carry what step_lists' fast
        paths do not: observations as bytes (u8) or each env's lives."""
        n, ad = len(self.envs), self.act_codec.dim
        rows = self.act_codec.rows(actions, n) if len(actions) == n * ad else None
        if type(rows) is not list or False in self.running:
            return self._rows(actions)
        obs, final, obs_u8, final_u8 = [], [], bytearray(), bytearray()
        rewards, terms, truncs, lives = [], [], [], []
        try:
            for i, a in enumerate(rows):
                e = self.envs[i]
                o, r, term, trunc, info = e.step(a)
                if self.max_steps > 0:
                    self.elapsed[i] += 1
                    if self.elapsed[i] >= self.max_steps:
                        trunc = True
                term, trunc = bool(term), bool(trunc)
                rewards.append(float(r))
                terms.append(term)
                truncs.append(trunc)
                if self.lives:
                    lives.append(int(info["lives"]))
                if term or trunc:
                    self.running[i] = False
                    if self.autoreset:
                        if self.u8:
                            final_u8 += self._bytes(o)
                        else:
                            self._obs(o, final)
                        o, _ = e.reset(seed=None)
                        self.elapsed[i], self.running[i] = 0, True
                if self.u8:
                    obs_u8 += self._bytes(o)
                else:
                    self._obs(o, obs)
        except Exception as ex:
            return _status(grpc.StatusCode.INTERNAL, "ENV_ERROR", "step: %r" % (ex,))
        return env_pb2.EnvResponse(batch=env_pb2.Batch(
            obs=obs, rewards=rewards, terminated=terms, truncated=truncs, final_obs=final,
            obs_u8=bytes(obs_u8), final_obs_u8=bytes(final_u8), lives=lives))

    def _rows(self, actions):
        """The envs' actions (a list), or an error EnvResponse: every
        action and env is checked before any env steps."""
        n, ad = len(self.envs), self.act_codec.dim
        if len(actions) != n * ad:
            return _status(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ACTION",
                           "%d envs want %dx%d action values, got %d" % (n, n, ad, len(actions)))
        rows = self.act_codec.rows(actions, n)
        if type(rows) is tuple:
            i, why = rows
            return _status(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ACTION", "env %d: %s" % (i, why))
        running = self.running
        if False in running:
            i = running.index(False)
            return _status(grpc.StatusCode.FAILED_PRECONDITION, "NEEDS_RESET",
                           "env %d: step before reset or after the episode ended" % i)
        return rows

    # Per env, the step loop does the step, the time limit (only when the
    # session sets one: elapsed is not read otherwise), the float and bool
    # conversions in the order they always ran (an env's bad value fails
    # at the same env), and the autoreset; the common observation (a flat
    # float array, or a list of floats) takes one type test and one C call.

    def step_lists(self, actions, seg=None):
        """Steps every env; returns (obs, rewards, terminated, truncated,
        final_obs) as flat lists, or an error EnvResponse. With seg (a
        herd_env.shm segment) it writes them into seg and returns None:
        float32 observation arrays of at least _ROWS_MIN_DIM values are
        copied straight into the segment's NumPy views (rows), the others
        as the lists hold them (the segment then holds nothing the client
        reads when the answer is an error). A session whose observations
        travel as bytes, or whose envs report lives, steps through
        step_plain and writes its batch into seg."""
        # _rows inline: a call less per message, which a 1-env message
        # notices.
        if seg is not None and (self.u8 or self.lives):
            r = self.step_plain(actions)
            if not r.HasField("batch"):
                return r
            seg.write_batch(r.batch)
            return None
        n, ad = len(self.envs), self.act_codec.dim
        if len(actions) != n * ad:
            return self._rows(actions)
        rows = self.act_codec.rows(actions, n)
        running = self.running
        if type(rows) is tuple or False in running:
            return self._rows(actions)
        into = seg is not None and self.rows_path and seg.obs_rows is not None
        obs, final, rewards, terms, truncs = [], [], [], [], []
        envs, elapsed, max_steps, autoreset = self.envs, self.elapsed, self.max_steps, self.autoreset
        dim, flat, ndarray, put_obs, put_row = self.obs_codec.dim, self.obs_codec.flat_shape, _ndarray, self._obs, self._put_row
        add_obs, add_rew, add_term, add_trunc = obs.extend, rewards.append, terms.append, truncs.append
        try:
            for i, a in enumerate(rows):
                e = envs[i]
                o, r, term, trunc, _ = e.step(a)
                if max_steps > 0:
                    elapsed[i] += 1
                    if elapsed[i] >= max_steps:
                        trunc = True
                term, trunc = bool(term), bool(trunc)
                add_rew(float(r))
                add_term(term)
                add_trunc(trunc)
                if term or trunc:
                    running[i] = False
                    if autoreset:
                        if into:
                            put_row(seg, True, i, o)
                        else:
                            put_obs(o, final)
                        o, _ = e.reset(seed=None)
                        elapsed[i], running[i] = 0, True
                if into:
                    put_row(seg, False, i, o)
                elif type(o) is ndarray and o.shape == flat and o.dtype.kind == "f":
                    add_obs(o.tolist())  # Gymnasium's Box observations: floats in one C call
                elif type(o) is list and len(o) == dim and all([type(v) is float for v in o]):
                    add_obs(o)
                else:
                    put_obs(o, obs)
        except Exception as ex:
            return _status(grpc.StatusCode.INTERNAL, "ENV_ERROR", "step: %r" % (ex,))
        if into:
            seg.write_rest(rewards, terms, truncs)
        elif seg is not None:
            seg.write(obs, rewards, terms, truncs, final)
        else:
            return obs, rewards, terms, truncs, final
        return None

    def _put_row(self, seg, final, i, o):
        """Writes env i's observation o into seg's observations (or final
        observations) with the bits the lists and seg.write give it, except
        that a float32 array's signalling NaN is not made quiet."""
        if type(o) is _ndarray and o.dtype is _f32 and o.shape == self.obs_codec.flat_shape:
            (seg.final_rows if final else seg.obs_rows)[i] = o
            return
        vals = []
        self._obs(o, vals)
        seg.write_row(final, i, vals)

    def state(self, req):
        if req.index >= len(self.envs):
            return None, "state of env %d of %d" % (req.index, len(self.envs))
        u = _unwrapped(self.envs[req.index])
        if not hasattr(u, "state"):
            return _status(grpc.StatusCode.UNIMPLEMENTED, "UNSUPPORTED", "env has no state attribute"), None
        resp = env_pb2.StateResponse()
        if req.set:
            cur = flatten(u.state) if u.state is not None else []
            if (cur and len(req.state) != len(cur)) or any(math.isnan(v) or math.isinf(v) for v in req.state):
                return _status(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_STATE",
                               "state of %d values, want %d finite values" % (len(req.state), len(cur))), None
            if isinstance(u.state, (list, tuple)):
                u.state = type(u.state)(req.state)
            elif hasattr(u.state, "dtype"):  # a NumPy array, as Gymnasium's envs keep it
                u.state = __import__("numpy").asarray(list(req.state), dtype=u.state.dtype).reshape(u.state.shape)
            else:
                u.state = list(req.state)
            get_obs = getattr(u, "_get_obs", None)
            obs = []
            self._obs(get_obs() if get_obs is not None else u.state, obs)
            resp.obs.extend(obs)
            self.running[req.index] = True
            self.elapsed[req.index] = 0
        resp.state.extend(flatten(u.state))
        return env_pb2.EnvResponse(state=resp), None


class EnvServicer(env_pb2_grpc.EnvServiceServicer):
    """herd.v1 EnvService over a factory of Gymnasium-style envs."""

    parallel = False  # herd_env.shm steps its sessions through the segment

    def __init__(self, factory, env_id, max_envs=4096, max_sessions=None):
        self.factory = factory
        self.env_id = env_id
        self.max_envs = max_envs
        self.max_sessions = max_sessions
        self._slots = threading.BoundedSemaphore(max_sessions) if max_sessions else None

    def Describe(self, request, context):
        return env_pb2.DescribeResponse(protocol_versions=[PROTOCOL_VERSION], env_ids=[self.env_id],
                                        server="herd_env (python)")

    def open(self, first):
        """Checks a session's first message and makes its envs: returns
        (session, None) or (None, (grpc.StatusCode, message))."""
        if first.WhichOneof("msg") != "open":
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "the first message of a session must be open")
        op = first.open
        if op.protocol_version != PROTOCOL_VERSION:
            return None, (grpc.StatusCode.FAILED_PRECONDITION,
                          "protocol version %d; this server speaks %d" % (op.protocol_version, PROTOCOL_VERSION))
        if op.env_id != self.env_id:
            return None, (grpc.StatusCode.NOT_FOUND, "env id %r; this server serves %r" % (op.env_id, self.env_id))
        if not 0 < op.num_envs <= self.max_envs:
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "num_envs %d, want 1..%d" % (op.num_envs, self.max_envs))
        try:
            return _Session(self.factory, op), None
        except Exception as ex:
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "making the env: %r" % (ex,))

    @staticmethod
    def handle(sess, req):
        """Answers one request after open: returns (response, None), or
        (None, message) for a malformed session."""
        kind = req.WhichOneof("msg")
        if kind == "step":
            return sess.step(list(req.step.actions)), None
        if kind == "reset":
            return sess.reset(list(req.reset.seeds))
        if kind == "state":
            return sess.state(req.state)
        if kind == "open":
            return None, "open sent twice in one session"
        return None, "empty request"

    def Session(self, request_iterator, context):
        """The session of a stream of serialized EnvRequests, answered
        with serialized EnvResponses (both gRPC servers register it raw,
        add_env_service): a step in the canonical encoding is parsed and
        answered by stepwire, everything else goes through protobuf."""
        if self._slots is not None and not self._slots.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          "%d sessions are open, the most this server takes" % self.max_sessions)
        try:
            yield from self._session(request_iterator, context)
        finally:
            if self._slots is not None:
                self._slots.release()

    def _session(self, request_iterator, context):
        first = next(request_iterator, None)
        if first is None:
            return
        sess, bad = self.open(_request(first))
        if bad is not None:
            context.abort(*bad)
        fast = not self.parallel
        parse, FromString = stepwire.parse_step, env_pb2.EnvRequest.FromString
        try:
            yield sess.open_response().SerializeToString()
            for raw in request_iterator:
                if fast:
                    acts = parse(raw)
                    if acts is not None:
                        yield sess.step_wire(acts)
                        continue
                try:
                    req = FromString(raw)
                except Exception as ex:  # protobuf's DecodeError
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad request: %r" % (ex,))
                resp, bad = self.handle(sess, req)
                if bad is not None:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, bad)
                yield resp.SerializeToString()
        finally:
            sess.close()


def _request(raw):
    """A session's first message parsed; a malformed one reads as an
    empty request, which open refuses."""
    try:
        return env_pb2.EnvRequest.FromString(raw)
    except Exception:
        return env_pb2.EnvRequest()


def add_env_service(servicer, server):
    """Registers servicer's Describe and Session on a grpcio server, the
    session raw (bytes in and out), as EnvServicer.Session wants."""
    handlers = {
        "Describe": grpc.unary_unary_rpc_method_handler(
            servicer.Describe, request_deserializer=env_pb2.DescribeRequest.FromString,
            response_serializer=env_pb2.DescribeResponse.SerializeToString),
        "Session": grpc.stream_stream_rpc_method_handler(servicer.Session),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("herd.v1.EnvService", handlers),))


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def make_server(add, host, port, max_message_bytes=MAX_MESSAGE_BYTES, tls_cert=None, tls_key=None,
                tls_client_ca=None, workers=32):
    """Returns (server, bound port), not yet started; add(server) registers
    the servicers."""
    # so_reuseport off: a port already in use is an error, not a shared port.
    opts = [("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5000)]
    # Each live call holds a worker thread; past `workers` calls, gRPC
    # answers RESOURCE_EXHAUSTED at once rather than queueing a client that
    # would then wait until its deadline. The servicer bounds sessions.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), options=opts,
                         maximum_concurrent_rpcs=workers)
    add(server)
    return server, _bind(server, host, port, tls_cert, tls_key, tls_client_ca)


def _bind(server, host, port, tls_cert, tls_key, tls_client_ca):
    addr = "%s:%d" % (host, port)
    if tls_cert or tls_key or tls_client_ca:
        if not (tls_cert and tls_key):
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        ca = _read(tls_client_ca) if tls_client_ca else None
        creds = grpc.ssl_server_credentials([(_read(tls_key), _read(tls_cert))], root_certificates=ca,
                                            require_client_auth=ca is not None)
        bound = server.add_secure_port(addr, creds)
    else:
        bound = server.add_insecure_port(addr)
    if bound == 0:
        raise OSError("cannot listen on %s" % addr)
    return bound


def make_h2_server(servicer, host, port, max_message_bytes=MAX_MESSAGE_BYTES, tls_cert=None, tls_key=None,
                   tls_client_ca=None, workers=32, procs=None, listen=True):
    """make_server's counterpart on herd_env.h2server (--grpc-impl h2):
    the same servicer's Describe and Session behind a leaner HTTP/2 stack."""
    try:
        from . import h2server
    except ImportError as ex:
        raise ValueError("--grpc-impl h2 needs Debian's python3-h2 (%s)" % (ex,)) from None
    ctx = None
    if tls_cert or tls_key or tls_client_ca:
        if not (tls_cert and tls_key):
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        ctx = h2server.ssl_context(tls_cert, tls_key, tls_client_ca)
    handlers = {
        b"/herd.v1.EnvService/Describe": (False, env_pb2.DescribeRequest.FromString, servicer.Describe),
        b"/herd.v1.EnvService/Session": (True, None, servicer.Session),  # raw, as add_env_service
    }
    try:
        server = h2server.H2Server(handlers, host, port, max_message_bytes, workers, ctx, workers=procs, listen=listen)
    except OSError as ex:
        raise OSError("cannot listen on %s:%d: %s" % (host, port, os.strerror(ex.errno) if (ex.errno or 0) > 0 else ex.strerror or ex)) from None
    return server, server.port


def add_common_flags(p):
    p.add_argument("--host", default="127.0.0.1", help="listen host (default 127.0.0.1; 0.0.0.0 serves other machines)")
    p.add_argument("--port", type=int, required=True, help="listen port (0: any free port, printed)")
    p.add_argument("--tls-cert", help="server certificate (PEM); enables TLS")
    p.add_argument("--tls-key", help="server private key (PEM)")
    p.add_argument("--tls-client-ca", help="CA (PEM) client certificates must chain to; enables mutual TLS")
    p.add_argument("--max-message-mb", type=int, default=MAX_MESSAGE_BYTES >> 20)


def run_until_signal(server, what, port, shm=None):
    """Starts server (None: none) and shm (a ShmServer, or None), prints
    where they listen, and serves until SIGINT/SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if shm is not None:
        shm.start()
        print("herd_env: serving %s on shm %s" % (what, shm.name), flush=True)
    if server is not None:
        server.start()
        print("herd_env: serving %s on port %d" % (what, port), flush=True)
    stop.wait()
    if shm is not None:
        shm.stop()
    # A session whose env is stuck in step holds its worker thread, which
    # the interpreter would wait for at exit: give sessions the grace
    # period, then leave without waiting for such a thread.
    if server is not None and not server.stop(grace=2).wait(timeout=5):
        print("herd_env: a session did not end within 5 s of the signal (env stuck?); exiting anyway",
              file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _worker_argv(args, env_id):
    """The command line of a --procs worker: this server's own flags,
    listening on nothing (serve adds --procs-child-fd)."""
    argv = [sys.executable, "-m", "herd_env.serve", "--env", args.env, "--kwargs", args.kwargs, "--id", env_id,
            "--max-envs", str(args.max_envs), "--max-sessions", str(args.max_sessions),
            "--shm-spin-us", str(args.shm_spin_us), "--max-message-mb", str(args.max_message_mb), "--port", "-1"]
    if args.shm:
        argv += ["--shm", args.shm]
    if args.profile_shm:
        argv.append("--profile-shm")
    if args.port >= 0 and args.grpc_impl == "h2":
        argv += ["--grpc-impl", "h2"]
        for flag, v in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key),
                        ("--tls-client-ca", args.tls_client_ca)):
            if v:
                argv += [flag, v]
    return argv


def _serve_worker(args, servicer):
    """A --procs worker: serves the connections its server passes it."""
    from .procs import serve_child
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    handlers = {}
    if args.shm:
        from .shm import ShmServer
        handlers[b"s"] = ShmServer(servicer, args.shm, args.max_sessions, profile=args.profile_shm,
                                   spin_us=args.shm_spin_us, listen=False).serve_session
    if args.grpc_impl == "h2":
        h2, _ = make_h2_server(servicer, args.host, 0, args.max_message_mb << 20, args.tls_cert, args.tls_key,
                               args.tls_client_ca, workers=args.max_sessions + UNARY_HEADROOM, listen=False)
        handlers[b"g"] = h2.serve_conn
    serve_child(args.procs_child_fd, handlers)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m herd_env.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--env", required=True, help="module:Class (or module:function) making one env")
    p.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments for --env")
    p.add_argument("--id", help="env id clients open (default: kwargs['id'] or the class name)")
    p.add_argument("--max-envs", type=int, default=4096, help="most envs one session may open")
    p.add_argument("--shm", metavar="NAME", help="also serve same-host clients through shared memory (shm://NAME/ID)")
    p.add_argument("--max-sessions", type=int, default=64,
                   help="most concurrent calls (sessions); more are refused with RESOURCE_EXHAUSTED")
    p.add_argument("--shm-spin-us", type=float, default=0,
                   help="after answering a shm step, watch for the next one this long before blocking (0: never)")
    p.add_argument("--grpc-impl", choices=("grpcio", "h2"), default="grpcio",
                   help="gRPC server: grpcio (default) or h2, herd_env's own on the h2 library (less CPU per message)")
    p.add_argument("--profile-shm", action="store_true",
                   help="print where each shm session's step messages spent their time when it ends (stderr)")
    p.add_argument("--procs", type=int, default=0, metavar="K",
                   help="run sessions in K worker processes, each new one in the one with the fewest (0: in this "
                        "process): shm sessions, and gRPC ones with --grpc-impl h2; a vector's ?inflight=K then "
                        "steps in K processes at once")
    p.add_argument("--procs-child-fd", type=int, default=-1, help=argparse.SUPPRESS)
    add_common_flags(p)
    args = p.parse_args(argv)
    try:
        kwargs = json.loads(args.kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError("--kwargs must be a JSON object")
        factory = load_factory(args.env, kwargs)
        env_id = args.id or kwargs.get("id") or args.env.partition(":")[2].split(".")[-1]
        from .parallel import servicer_for
        servicer = servicer_for(factory, env_id, args.max_envs, args.max_sessions)  # a PettingZoo Parallel env: herd_env.parallel
        shm_server = server = workers = None
        port = args.port
        h2 = args.grpc_impl == "h2"
        if not 0 <= args.shm_spin_us <= 50:
            raise ValueError("--shm-spin-us %g: want 0..50" % args.shm_spin_us)
        if not 0 <= args.procs <= 256:
            raise ValueError("--procs %d: want 0..256" % args.procs)
        if args.procs_child_fd >= 0:
            _serve_worker(args, servicer)  # never returns
        if args.procs and not args.shm and not h2:
            raise ValueError("--procs runs shm sessions (--shm) and gRPC ones with --grpc-impl h2; "
                             "grpcio's stay in this process")
        if args.procs:
            from .procs import Workers
            workers = Workers(args.procs, _worker_argv(args, env_id))
        if args.shm:
            from .shm import ShmServer
            shm_server = ShmServer(servicer, args.shm, args.max_sessions, profile=args.profile_shm,
                                   spin_us=args.shm_spin_us, workers=workers)
            shm_server.name = args.shm
        elif args.port < 0:
            raise ValueError("--port -1 (no gRPC) needs --shm")
        if args.port >= 0 and h2:
            server, port = make_h2_server(servicer, args.host, args.port, args.max_message_mb << 20, args.tls_cert,
                                          args.tls_key, args.tls_client_ca,
                                          # with --procs this server only hands connections over
                                          workers=args.max_sessions if workers else args.max_sessions + UNARY_HEADROOM,
                                          procs=workers)
        elif args.port >= 0:
            server, port = make_server(
                lambda s: add_env_service(servicer, s),
                args.host, args.port, args.max_message_mb << 20, args.tls_cert, args.tls_key, args.tls_client_ca,
                workers=args.max_sessions + UNARY_HEADROOM)
    except Exception as ex:
        print("herd_env.serve: %s" % (ex,), file=sys.stderr)
        return 2
    run_until_signal(server, "env %s" % env_id, port, shm_server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
