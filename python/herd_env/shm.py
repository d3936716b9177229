"""herd's same-host shared-memory transport for envs (shm://NAME/ENV_ID).

The server listens on the Unix-domain socket "herd-env-NAME" in Linux's
abstract namespace (no file). Per connection (one session):

    client -> 'P' len(u32 LE) EnvRequest     open first, then reset/state
    server -> 'P' len(u32 LE) EnvResponse
    client -> 'M' 'F', the 'F' carrying the segment's fd (SCM_RIGHTS),
              once after open
    server -> 'm'                            mapped
    client -> 'S'                            actions are in the segment
    server -> 's'                            results are in the segment,
              or 'P' and an EnvResponse with the error Status

Wake pipes: a client that sets bit 0 of the header's flags word (byte 20)
offers two pipes. This server then answers 'w' instead of 'm', the client
sends 'F' with two descriptors (the read end of its request pipe, the
write end of its answer pipe), and from then on every byte of the session
('S', 's', 'P' frames, starting with this server's 'm') travels on the
pipes instead of the socket. A pipe byte wakes the other side for less than
a socket byte does (no socket buffer to allocate and free; 6 against 10 µs
a round trip between two Python processes on a 2-core VM), and each side
holds the only copy of its write end, so a read still ends at once with
EOF when the other side dies. A client that does not set the bit (or an
older server, which answers 'm') keeps the socket.

Header bytes 24 and 28 hold the client's and the server's step counters
(uint32): the client stores its count before 'S', the server copies it
to its own before 's'. Each side may watch the other's for a few µs
before blocking on a read (--shm-spin-us here), which saves a sleep and
a wake-up when the answer comes at once; the pipe (or socket) bytes stay
the protocol.

The segment is the client's memfd (it has no name in /dev/shm and the
kernel frees it when the last process that maps it exits or unmaps it). Its
layout (herd/internal/shmwire's Layout) is a 64-byte header (b"HERDSHM2",
then n, obs dim, action dim as little-endian uint32; at byte 32 the size of
an observation value, uint32: 4 for float32, 1 for a session whose open
answer set obs_u8), then float32 actions, the observations, the final
observations (row i meaningful when env i's episode ended), float64
rewards, int32 lives per env (-1 when the envs report none), one byte per
env terminated, one byte per env truncated; each array starts at a
multiple of 8. A segment of another layout version (b"HERDSHM1": an older
client) is refused with an error naming both versions.

A multi-agent session (open with parallel = true, served by
herd_env.parallel) sends only 'P' messages: the gRPC session's
EnvRequests and EnvResponses framed on the socket, with no segment, as
herd's Go server does (service/envsvc/shm_linux.go).

Standard library, mmap and memoryview casts; with NumPy (optional), the
observations are written through NumPy views of the segment.
"""

import array
import functools
import mmap
import os
import socket
import struct
import sys
import threading
import time

import grpc

from ._proto.herd.v1 import env_pb2
from .spaces import _np

MAGIC = b"HERDSHM2"
OBS_SIZE, NO_LIVES = 32, -1  # as herd/internal/shmwire's ObsSize, NoLives
SPIN_MISSES, SPIN_PROBE = 4, 16  # as herd/internal/shmwire's SpinMisses, SpinProbe
FLAGS, FLAG_PIPES = 20, 1  # as herd/internal/shmwire's Flags, FlagPipes
MAX_FRAME = 64 << 20
_is_le = sys.byteorder == "little"


def _align8(x):
    return (x + 7) & ~7


def layout(n, od, ad, u8=False):
    """(act, obs, final, rew, lives, term, trunc, size) byte offsets of the
    arrays; observations one byte a value when u8, else float32."""
    vb = 1 if u8 else 4
    act = 64
    obs = act + _align8(4 * n * ad)
    final = obs + _align8(vb * n * od)
    rew = final + _align8(vb * n * od)
    lives = rew + 8 * n
    term = lives + _align8(4 * n)
    trunc = term + _align8(n)
    size = (trunc + _align8(n) + 4095) & ~4095
    return act, obs, final, rew, lives, term, trunc, size


def write_header(mm, n, od, ad, u8=False):
    """Writes a segment's header as herd's client does."""
    mm[:8] = MAGIC
    struct.pack_into("<3I", mm, 8, n, od, ad)
    struct.pack_into("<I", mm, OBS_SIZE, 1 if u8 else 4)


def socket_name(name):
    return "\0herd-env-" + name


def _recv_exact(recv, n):
    """n bytes from recv (a socket's recv, or an os.read bound to a fd)."""
    buf = bytearray()
    while len(buf) < n:
        chunk = recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _send_msg(conn, resp):
    _sendall_frame(conn.sendall, resp)


def _sendall_frame(sendall, resp):
    body = resp.SerializeToString()
    sendall(b"P" + struct.pack("<I", len(body)) + body)


class _Pipes:
    """A session's wake pipes: recv and sendall as a socket's, on the read
    end of the client's request pipe and the write end of its answer
    pipe."""

    def __init__(self, rfd, wfd):
        self.rfd, self.wfd = rfd, wfd
        self.recv = functools.partial(os.read, rfd)
        self.send = functools.partial(os.write, wfd)

    def sendall(self, data):
        mv = memoryview(data)
        while mv:
            mv = mv[os.write(self.wfd, mv):]

    def close(self):
        os.close(self.rfd)
        os.close(self.wfd)


class _Segment:
    """The session's arrays as memoryviews (and, with NumPy, float32
    observations as arrays) into the client's segment."""

    def __init__(self, fd, n, od, ad, u8=False):
        size = os.fstat(fd).st_size
        act, obs, final, rew, lives, term, trunc, need = layout(n, od, ad, u8)
        if size < need:
            raise ValueError("segment of %d bytes, %d envs need %d" % (size, n, need))
        self.mm = mmap.mmap(fd, need)
        magic = self.mm[:8]
        if magic[:7] == MAGIC[:7] and magic != MAGIC:
            self.mm.close()
            raise ValueError("segment layout %r, this side speaks %r: run the same herd version (herd_env and herd) on both sides"
                             % (magic.decode("ascii", "replace"), MAGIC.decode()))
        vb = 1 if u8 else 4
        if magic != MAGIC or struct.unpack_from("<3I", self.mm, 8) != (n, od, ad) or struct.unpack_from("<I", self.mm, OBS_SIZE)[0] != vb:
            self.mm.close()
            raise ValueError("segment header does not match the session (%d envs, obs %d of %d bytes a value, action %d)" % (n, od, vb, ad))
        mv = memoryview(self.mm)
        self.views = [mv]
        self.u8 = u8
        self.act = self._view(mv, act, 4 * n * ad, "f")
        self.obs = self._view(mv, obs, vb * n * od, "B" if u8 else "f")
        self.final = self._view(mv, final, vb * n * od, "B" if u8 else "f")
        self.rew = self._view(mv, rew, 8 * n, "d")
        self.lives = self._view(mv, lives, 4 * n, "i")
        self.term = self._view(mv, term, n, "B")
        self.trunc = self._view(mv, trunc, n, "B")
        self.od = od
        self.wants_pipes = bool(struct.unpack_from("<I", self.mm, FLAGS)[0] & FLAG_PIPES)
        # The header's step counters (herd/internal/shmwire: ReqSeq,
        # RespSeq): the client's count of steps sent, and ours of steps
        # answered.
        self.req_seq = self._view(mv, 24, 4, "I")
        self.resp_seq = self._view(mv, 28, 4, "I")
        # Precompiled packers write a step's results without building an
        # array per message (obs as float32, rewards as float64); an obs
        # beyond float32's range, which struct refuses, goes through
        # array's conversion to ±inf as it always did. Rewards, lives,
        # terminated and truncated are one struct (float64s, int32s, then
        # one byte per bool, zeros in the padding): one call writes all
        # four (no_lives: the lives of envs that report none).
        self.mm_obs, self.obs_s = obs, struct.Struct("<%df" % (n * od))
        self.mm_rew = rew
        self.rest_s = struct.Struct("<%dd%di%dx%d?%dx%d?" % (n, n, term - lives - 4 * n, n, trunc - term - n, n))
        self.no_lives = (NO_LIVES,) * n
        self.mm_final, self.row_s = final, struct.Struct("<%df" % od)
        # With NumPy, float32 observations and final observations as (n, od)
        # arrays on the mapping: serve's step_lists copies an env's float32
        # observation in with one assignment. None without NumPy, and in a
        # uint8 segment.
        self.obs_rows = self.final_rows = None
        if _np is not None and not u8:
            self.obs_rows = _np.frombuffer(self.mm, _np.float32, n * od, obs).reshape(n, od)
            self.final_rows = _np.frombuffer(self.mm, _np.float32, n * od, final).reshape(n, od)

    def _view(self, mv, off, size, fmt):
        v = mv[off:off + size].cast(fmt)
        self.views.append(v)
        return v

    def write_rest(self, rewards, terms, truncs, lives=None):
        """Writes the rewards, lives (None: the envs report none), terminated
        and truncated flags."""
        self.rest_s.pack_into(self.mm, self.mm_rew, *rewards, *(self.no_lives if lives is None else lives), *terms, *truncs)

    def write(self, obs, rewards, terms, truncs, final):
        """Writes a float32 segment's step results (flat lists)."""
        mm = self.mm
        try:
            self.obs_s.pack_into(mm, self.mm_obs, *obs)
        except OverflowError:
            self.obs[:] = array.array("f", obs)
        self.write_rest(rewards, terms, truncs)
        if final:
            od, k = self.od, 0
            for i, (t, u) in enumerate(zip(terms, truncs)):
                if t or u:
                    self.final[i * od:(i + 1) * od] = array.array("f", final[k * od:(k + 1) * od])
                    k += 1

    def write_batch(self, b):
        """Writes a step's env_pb2.Batch: observations as bytes (obs_u8) in
        a uint8 segment, else as floats, and the envs' lives."""
        od = self.od
        if self.u8:
            obs, final = b.obs_u8, b.final_obs_u8
            self.obs[:] = obs
        else:
            obs, final = b.obs, b.final_obs
            self.obs[:] = array.array("f", obs)
        self.write_rest(b.rewards, b.terminated, b.truncated, b.lives or None)
        k = 0
        for i, (t, u) in enumerate(zip(b.terminated, b.truncated)):
            if (t or u) and len(final) >= (k + 1) * od:
                row = final[k * od:(k + 1) * od]
                self.final[i * od:(i + 1) * od] = row if self.u8 else array.array("f", row)
                k += 1

    def write_row(self, final, i, vals):
        """Writes env i's flat observation vals (floats) into the
        observations, or the final observations if final, as write does."""
        od = self.od
        try:
            self.row_s.pack_into(self.mm, (self.mm_final if final else self.mm_obs) + 4 * od * i, *vals)
        except OverflowError:
            (self.final if final else self.obs)[i * od:(i + 1) * od] = array.array("f", vals)

    def close(self):
        self.obs_rows = self.final_rows = None  # NumPy's exports of the mapping, which close needs gone
        for v in reversed(self.views):
            v.release()
        self.views = []
        try:
            self.mm.close()
        except BufferError:
            # An array view still alive somewhere (a traceback's frame):
            # the mapping goes when it does; the session's cleanup goes on.
            pass


class ShmServer:
    """Serves an EnvServicer's sessions over the shm transport; one thread
    per session, at most max_sessions at once (more are refused with
    RESOURCE_EXHAUSTED)."""

    def __init__(self, servicer, name, max_sessions=64, profile=False, spin_us=0, workers=None, listen=True):
        if not sys.platform.startswith("linux"):
            raise OSError("--shm needs Linux")
        if not _is_le:
            raise OSError("--shm needs a little-endian machine")
        self.servicer = servicer
        self.max_sessions = max_sessions
        self.profile = profile
        self.spin_ns = int(spin_us * 1000)
        self.lock = threading.Lock()
        self.live = set()
        self.stopped = False
        # workers (herd_env.procs.Workers): sessions run in worker
        # processes; listen=False: this is one, fed by serve_session.
        self.workers = workers
        self.sock = None
        if not listen:
            return
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(socket_name(name))
        except OSError as ex:
            self.sock.close()
            raise OSError("cannot listen on shm name %r: %s" % (name, ex))
        self.sock.listen(64)
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def start(self):
        if self.workers is not None:
            self.workers.start()
        self.thread.start()

    def stop(self):
        self.stopped = True
        if self.workers is not None:
            self.workers.stop()
        if self.sock is None:
            return
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self.lock:
            for c in list(self.live):
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _accept(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.workers is not None:
                refused = self.workers.hand_over(b"s", conn, self.max_sessions)
                if refused is not None:
                    self._refuse(conn, *refused)
                continue
            with self.lock:
                full = len(self.live) >= self.max_sessions
                if not full:
                    self.live.add(conn)
            if full:
                self._refuse(conn, grpc.StatusCode.RESOURCE_EXHAUSTED,
                             "%d sessions are open, the most this server takes" % self.max_sessions)
                continue
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _refuse(self, conn, code, message):
        try:
            _send_msg(conn, _ending(code, message))
        except OSError:
            pass
        finally:
            conn.close()

    def serve_session(self, conn):
        """Runs one session a --procs server passed to this worker,
        returning when it ends."""
        self._session(conn)

    def _session(self, conn):
        sess = seg = pipes = None
        prof = _Profile() if self.profile else None
        sendall = conn.sendall
        try:
            sess = self._open(conn)
            if sess is None:
                return
            if getattr(self.servicer, "parallel", False):
                self._parallel(conn, sess)
                return
            n, od, ad = len(sess.envs), sess.obs_codec.dim, sess.act_codec.dim
            # The session's byte stream: the socket until the client hands
            # over its wake pipes (then the pipes), and the step path's
            # callables, bound once (timed when profiling).
            recv, sendall = conn.recv, conn.sendall
            send, step, wait = sendall, sess.step_lists, None
            spin, clock, misses, answered = self.spin_ns, time.perf_counter_ns, 0, 0

            def bind():
                nonlocal send, step, wait
                send, step, wait = sendall if pipes is None else pipes.send, sess.step_lists, recv
                if prof is not None:
                    wait, send, step = prof.wrap("wait", recv), prof.wrap("send", send), prof.wrap("step", step)
            bind()
            while True:
                tag = wait(1)
                if self.stopped:
                    # stop() cannot wake a read on a pipe (it shuts down
                    # the sockets only): a session on wake pipes ends here,
                    # at its next message, unanswered.
                    return
                if tag == b"S":
                    if seg is None:
                        _sendall_frame(sendall, _ending(grpc.StatusCode.FAILED_PRECONDITION, "step through shm before M"))
                        return
                    r = step(seg.act.tolist(), seg)
                    if r is None:
                        req = seg.req_seq[0]
                        seg.resp_seq[0] = req  # the client may be watching it
                        send(b"s")
                        answered += 1
                        if spin and (misses < SPIN_MISSES or answered % SPIN_PROBE == 0):
                            # Watch for the client's next step a few µs
                            # before blocking in recv: a client that steps
                            # again at once then finds this thread running.
                            # After SPIN_MISSES misses in a row (a client
                            # that thinks between steps, or does not count),
                            # only every SPIN_PROBE-th step spins.
                            deadline = clock() + spin
                            while seg.req_seq[0] == req:
                                if clock() >= deadline:
                                    misses += 1
                                    break
                            else:
                                misses = 0
                    else:
                        _sendall_frame(sendall, r)
                    continue
                if not tag:
                    return  # the client closed the session or died
                if tag == b"M":
                    if seg is not None:
                        _sendall_frame(sendall, _ending(grpc.StatusCode.INVALID_ARGUMENT, "segment sent twice"))
                        return
                    fds = _recv_fds(conn, 1)
                    if fds is None:
                        _send_msg(conn, _ending(grpc.StatusCode.INVALID_ARGUMENT, "M without a file descriptor"))
                        return
                    try:
                        seg = _Segment(fds[0], n, od, ad, sess.u8)
                    except (ValueError, OSError) as ex:
                        _send_msg(conn, _ending(grpc.StatusCode.INVALID_ARGUMENT, "segment: %s" % (ex,)))
                        return
                    finally:
                        os.close(fds[0])
                    if not seg.wants_pipes:
                        conn.sendall(b"m")
                        continue
                    conn.sendall(b"w")
                    fds = _recv_fds(conn, 2)
                    if fds is None:
                        _send_msg(conn, _ending(grpc.StatusCode.INVALID_ARGUMENT, "w answered without two pipes"))
                        return
                    pipes = _Pipes(*fds)
                    recv, sendall = pipes.recv, pipes.sendall
                    bind()
                    sendall(b"m")
                elif tag == b"P":
                    req = _read_req(recv)
                    resp, bad = self.servicer.handle(sess, req)
                    if bad is not None:
                        _sendall_frame(sendall, _ending(grpc.StatusCode.INVALID_ARGUMENT, bad))
                        return
                    _sendall_frame(sendall, resp)
                else:
                    _sendall_frame(sendall, _ending(grpc.StatusCode.INVALID_ARGUMENT, "unknown request byte %r" % (tag,)))
                    return
        except (EOFError, OSError):
            return  # the client went away mid-message
        except Exception as ex:  # a malformed message: end this session only
            try:
                _sendall_frame(sendall, _ending(grpc.StatusCode.INVALID_ARGUMENT, "bad request: %r" % (ex,)))
            except OSError:
                pass
        finally:
            if prof is not None:
                prof.report(sys.stderr)
            if seg is not None:
                seg.close()
            if pipes is not None:
                pipes.close()
            if sess is not None:
                sess.close()
            with self.lock:
                self.live.discard(conn)
            conn.close()

    def _parallel(self, conn, sess):
        """Runs a multi-agent session as herd's Go server does: the gRPC
        session's messages framed on the socket, no segment (the
        per-agent batches change shape as agents leave, and one message
        already carries every env)."""
        while True:
            tag = conn.recv(1)
            if not tag:
                return  # the client closed the session or died
            if tag != b"P":
                _send_msg(conn, _ending(grpc.StatusCode.INVALID_ARGUMENT,
                                        "request byte %r: a multi-agent session sends framed messages only" % (tag,)))
                return
            resp, bad = self.servicer.handle(sess, _read_req(conn.recv))
            if bad is not None:
                _send_msg(conn, _ending(grpc.StatusCode.INVALID_ARGUMENT, bad))
                return
            _send_msg(conn, resp)

    def _open(self, conn):
        tag = conn.recv(1)
        if not tag:
            return None
        if tag != b"P":
            _send_msg(conn, _ending(grpc.StatusCode.INVALID_ARGUMENT, "the first message of a session must be open"))
            return None
        sess, bad = self.servicer.open(_read_req(conn.recv))
        if bad is not None:
            _send_msg(conn, _ending(*bad))
            return None
        _send_msg(conn, sess.open_response())
        return sess


class _Profile:
    """Where a session's step messages spend their time (--profile-shm):
    wait is the time blocked for the next request (the client's share of
    the round trip, both wake-ups included), step the envs, the checks and
    the results' writes into the segment, send the answer byte. Each timed
    call costs about two perf_counter_ns calls more than untimed."""

    def __init__(self):
        self.ns = {}
        self.calls = {}

    def wrap(self, what, fn):
        pc = time.perf_counter_ns
        ns, calls = self.ns, self.calls
        ns[what], calls[what] = 0, 0

        def timed(*args):
            t0 = pc()
            try:
                return fn(*args)
            finally:
                ns[what] += pc() - t0
                calls[what] += 1
        return timed

    def report(self, out):
        steps = self.calls.get("step", 0)
        if not steps:
            return
        parts = ["%s %.2f" % (k, self.ns[k] / max(1, self.calls[k]) / 1e3) for k in ("wait", "step", "send")]
        print("herd_env.shm profile: %d steps; us per call: %s" % (steps, ", ".join(parts)), file=out, flush=True)


def _read_req(recv):
    (size,) = struct.unpack("<I", _recv_exact(recv, 4))
    if size > MAX_FRAME:
        raise EOFError
    return env_pb2.EnvRequest.FromString(_recv_exact(recv, size))


def _recv_fds(conn, k):
    """The k descriptors sent with an 'F' byte (close-on-exec, so that a
    process the env starts holds no pipe end: the client's read would miss
    EOF when this server dies), or None (any others closed)."""
    data, fds, _, _ = socket.recv_fds(conn, 1, k, socket.MSG_CMSG_CLOEXEC)
    if data == b"F" and len(fds) == k:
        return fds
    for fd in fds:
        os.close(fd)
    return None


def _ending(code, message):
    """An error that ends the session (no reason word, unlike in-band ones)."""
    return env_pb2.EnvResponse(error=env_pb2.Status(code=code.value[0], message=message))
