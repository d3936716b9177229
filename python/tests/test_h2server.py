"""herd_env.h2server (herd_env.serve --grpc-impl h2) at the frame level: a
raw HTTP/2 client writes frames as a peer may (split over reads, header
blocks in CONTINUATIONs, a message over several DATA frames, a compressed
flag, an unknown method, RST_STREAM mid-session, a small window) and checks
what comes back. The Go tests cover the rest against gRPC-Go's client
(HERD_PY_GRPC_IMPL=h2).

    cd python && PYTHONPATH=.:tests python3 -m unittest test_h2server
"""

import socket
import struct
import threading
import time
import unittest

try:
    import hpack

    from herd_env import h2server
except ImportError:  # Debian's python3-h2 missing: herd_env.serve refuses --grpc-impl h2 then
    h2server = None

from herd_env import PROTOCOL_VERSION, serve
from herd_env._proto.herd.v1 import env_pb2
from herd_env.testenvs import Trivial

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
SESSION, DESCRIBE = "/herd.v1.EnvService/Session", "/herd.v1.EnvService/Describe"


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def grpc_msg(m, flag=0):
    body = m.SerializeToString()
    return bytes([flag]) + struct.pack(">I", len(body)) + body


def open_req(n=1, env_id="Trivial"):
    return env_pb2.EnvRequest(open=env_pb2.OpenRequest(protocol_version=PROTOCOL_VERSION, env_id=env_id,
                                                       num_envs=n, autoreset=True))


def step_req(actions):
    return env_pb2.EnvRequest(step=env_pb2.StepRequest(actions=actions))


class Closing(Trivial):
    """Trivial that counts its closes (class-wide) and sleeps in step when
    asked to."""

    closed = 0
    lock = threading.Lock()

    def __init__(self, sleep_s=0.0):
        super().__init__()
        self.sleep_s = sleep_s

    def step(self, action):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return super().step(action)

    def close(self):
        with Closing.lock:
            Closing.closed += 1


class Client:
    """A raw HTTP/2 client: frames written as given, frames read back."""

    def __init__(self, port, settings=b""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.buf = b""
        self.pending = {}  # stream -> frames read while waiting for another
        self.sock.sendall(h2server.PREFACE + frame(SETTINGS, 0, 0, settings))

    def send(self, data, chunk=0):
        """Writes data, in pieces of chunk bytes with a pause between them
        (so the server reads them apart) when chunk > 0."""
        if not chunk:
            self.sock.sendall(data)
            return
        for i in range(0, len(data), chunk):
            self.sock.sendall(data[i:i + chunk])
            time.sleep(0.002)

    def headers(self, sid, path, pieces=1, end_stream=False, extra=()):
        block = self.enc.encode([(":method", "POST"), (":scheme", "http"), (":path", path),
                                 (":authority", "localhost"), ("content-type", "application/grpc"),
                                 ("te", "trailers")] + list(extra))
        if pieces == 1:
            return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), sid, block)
        size = -(-len(block) // pieces)
        parts = [block[i:i + size] for i in range(0, len(block), size)]
        out = frame(HEADERS, END_STREAM if end_stream else 0, sid, parts[0])
        for i, p in enumerate(parts[1:]):
            out += frame(CONTINUATION, END_HEADERS if i == len(parts) - 2 else 0, sid, p)
        return out

    def read_frame(self):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            more = self.sock.recv(65536)
            if not more:
                raise EOFError("connection closed")
            self.buf += more
        n = int.from_bytes(self.buf[:3], "big")
        f = (self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF, self.buf[9:9 + n])
        self.buf = self.buf[9 + n:]
        if f[0] == SETTINGS and not f[1] & ACK:
            self.sock.sendall(frame(SETTINGS, ACK, 0))
        return f

    def call(self, sid, want_messages=None, on_data=None, resp_type=env_pb2.EnvResponse):
        """Reads until sid ends (trailers, RST_STREAM) or want_messages
        messages came: returns (headers, messages, trailers, rst code)."""
        hdrs, trailers, msgs, data, rst = None, None, [], b"", None
        while True:
            if self.pending.get(sid):
                ftype, flags, fsid, payload = self.pending[sid].pop(0)
            else:
                ftype, flags, fsid, payload = self.read_frame()
            if fsid != sid:
                if fsid != 0:
                    self.pending.setdefault(fsid, []).append((ftype, flags, fsid, payload))
                continue
            if ftype == HEADERS:
                h = dict(self.dec.decode(payload, raw=True))
                if hdrs is None and not flags & END_STREAM:
                    hdrs = h
                elif hdrs is None:
                    hdrs = trailers = h  # trailers-only
                else:
                    trailers = h
            elif ftype == DATA:
                if on_data is not None:
                    on_data(payload)
                data += payload
                while len(data) >= 5 and len(data) >= 5 + int.from_bytes(data[1:5], "big"):
                    n = int.from_bytes(data[1:5], "big")
                    assert data[0] == 0, "compressed flag on an answer"
                    msgs.append(resp_type.FromString(data[5:5 + n]))
                    data = data[5 + n:]
            elif ftype == RST_STREAM:
                rst = int.from_bytes(payload, "big")
            if trailers is not None or rst is not None or (want_messages and len(msgs) >= want_messages):
                return hdrs, msgs, trailers, rst

    def close(self):
        self.sock.close()


@unittest.skipIf(h2server is None, "no python3-h2")
class H2ServerTest(unittest.TestCase):
    def start(self, factory=Trivial, env_id="Trivial", max_bytes=serve.MAX_MESSAGE_BYTES, workers=8):
        servicer = serve.EnvServicer(factory, env_id)
        server, port = serve.make_h2_server(servicer, "127.0.0.1", 0, max_bytes, workers=workers)
        server.start()
        self.addCleanup(lambda: server.stop(0).wait(5))
        c = Client(port)
        self.addCleanup(c.close)
        return server, port, c

    def open_session(self, c, sid, n=1, chunk=0, env_id="Trivial"):
        c.send(c.headers(sid, SESSION) + frame(DATA, 0, sid, grpc_msg(open_req(n, env_id))), chunk)
        hdrs, msgs, trailers, _ = c.call(sid, want_messages=1)
        self.assertIsNone(trailers, "session ended at open: %s" % (trailers,))
        self.assertEqual(hdrs[b":status"], b"200")
        self.assertEqual(hdrs[b"content-type"], b"application/grpc")
        self.assertEqual(msgs[0].open.num_envs, n)

    def step(self, c, sid, actions, chunk=0, data_frames=1):
        body = grpc_msg(step_req(actions))
        size = -(-len(body) // data_frames)
        c.send(b"".join(frame(DATA, 0, sid, body[i:i + size]) for i in range(0, len(body), size)), chunk)
        _, msgs, trailers, _ = c.call(sid, want_messages=1)
        self.assertIsNone(trailers)
        return msgs[0]

    def reset(self, c, sid, n=1):
        c.send(frame(DATA, 0, sid, grpc_msg(env_pb2.EnvRequest(reset=env_pb2.ResetRequest(seeds=[1] * n)))))
        _, msgs, trailers, _ = c.call(sid, want_messages=1)
        self.assertIsNone(trailers)
        return msgs[0]

    def test_session_split_across_reads(self):
        _, _, c = self.start()
        self.open_session(c, 1, chunk=3)
        self.reset(c, 1)
        resp = self.step(c, 1, [1.0], chunk=1)
        self.assertEqual(list(resp.batch.rewards), [1.0])
        self.assertEqual(len(resp.batch.obs), 4)
        c.send(frame(DATA, END_STREAM, 1), chunk=2)
        _, _, trailers, _ = c.call(1)
        self.assertEqual(trailers[b"grpc-status"], b"0")

    def test_headers_in_continuations(self):
        _, _, c = self.start()
        c.send(c.headers(1, SESSION, pieces=3) + frame(DATA, 0, 1, grpc_msg(open_req())))
        hdrs, msgs, trailers, _ = c.call(1, want_messages=1)
        self.assertIsNone(trailers)
        self.assertEqual(msgs[0].open.num_envs, 1)
        # Describe, a unary call, with its header block in CONTINUATIONs too.
        c.send(c.headers(3, DESCRIBE, pieces=4) + frame(DATA, END_STREAM, 3, grpc_msg(env_pb2.DescribeRequest())))
        _, msgs, trailers, _ = c.call(3, resp_type=env_pb2.DescribeResponse)
        self.assertEqual(trailers[b"grpc-status"], b"0")
        self.assertEqual(list(msgs[0].env_ids), ["Trivial"])

    def test_message_over_several_data_frames_and_two_in_one(self):
        _, _, c = self.start()
        self.open_session(c, 1)
        self.reset(c, 1)
        resp = self.step(c, 1, [0.0], data_frames=5)
        self.assertEqual(list(resp.batch.rewards), [1.0])
        two = grpc_msg(step_req([1.0])) + grpc_msg(step_req([0.0]))
        c.send(frame(DATA, 0, 1, two))
        _, msgs, _, _ = c.call(1, want_messages=2)
        self.assertEqual([list(m.batch.rewards) for m in msgs], [[1.0], [1.0]])

    def test_compressed_flag_refused(self):
        _, _, c = self.start()
        self.open_session(c, 1)
        c.send(frame(DATA, 0, 1, grpc_msg(step_req([1.0]), flag=1)))
        _, _, trailers, _ = c.call(1)
        self.assertEqual(trailers[b"grpc-status"], b"13")  # INTERNAL
        self.assertIn(b"compress", trailers[b"grpc-message"])

    def test_unknown_method(self):
        _, _, c = self.start()
        c.send(c.headers(1, "/herd.v1.EnvService/Nope") + frame(DATA, END_STREAM, 1, grpc_msg(open_req())))
        hdrs, msgs, trailers, _ = c.call(1)
        self.assertEqual(hdrs[b":status"], b"200")
        self.assertEqual(trailers[b"grpc-status"], b"12")  # UNIMPLEMENTED
        self.assertEqual(msgs, [])
        self.open_session(c, 3)  # the connection goes on

    def test_servicer_errors_as_grpcio(self):
        _, _, c = self.start()
        c.send(c.headers(1, SESSION) + frame(DATA, 0, 1, grpc_msg(step_req([1.0]))))
        _, _, trailers, _ = c.call(1)
        self.assertEqual(trailers[b"grpc-status"], b"3")  # INVALID_ARGUMENT: no open first
        self.assertEqual(trailers[b"grpc-message"], b"the first message of a session must be open")
        req = open_req()
        req.open.protocol_version = PROTOCOL_VERSION + 1
        c.send(c.headers(3, SESSION) + frame(DATA, 0, 3, grpc_msg(req)))
        _, _, trailers, _ = c.call(3)
        self.assertEqual(trailers[b"grpc-status"], b"9")  # FAILED_PRECONDITION
        c.send(c.headers(5, SESSION) + frame(DATA, 0, 5, grpc_msg(open_req(env_id="\u00d6tzi"))))
        _, _, trailers, _ = c.call(5)
        self.assertEqual(trailers[b"grpc-status"], b"5")  # NOT_FOUND
        self.assertIn(b"env id '%C3%96tzi'", trailers[b"grpc-message"])  # UTF-8, percent-encoded
        self.open_session(c, 7)
        c.send(frame(DATA, 0, 7, grpc_msg(open_req())))  # open twice
        _, _, trailers, _ = c.call(7)
        self.assertEqual(trailers[b"grpc-status"], b"3")

    def test_rst_stream_mid_session_closes_its_envs(self):
        _, _, c = self.start(factory=lambda: Closing(), env_id="Trivial")
        before = Closing.closed
        self.open_session(c, 1, n=3)
        self.open_session(c, 3, n=2)
        self.reset(c, 1, n=3)
        c.send(frame(RST_STREAM, 0, 1, struct.pack(">I", 8)))  # CANCEL
        deadline = time.time() + 5
        while Closing.closed < before + 3 and time.time() < deadline:
            time.sleep(0.01)
        self.assertEqual(Closing.closed, before + 3)
        self.reset(c, 3, n=2)  # the other session goes on
        c.close()  # and a closed connection ends it
        deadline = time.time() + 5
        while Closing.closed < before + 5 and time.time() < deadline:
            time.sleep(0.01)
        self.assertEqual(Closing.closed, before + 5)

    def test_ping_acked(self):
        _, _, c = self.start()
        c.send(frame(PING, 0, 0, b"herdping"))
        while True:
            ftype, flags, sid, payload = c.read_frame()
            if ftype == PING:
                self.assertEqual((flags, sid, payload), (ACK, 0, b"herdping"))
                break

    def test_sends_within_the_peer_window(self):
        servicer = serve.EnvServicer(Trivial, "Trivial")
        server, port = serve.make_h2_server(servicer, "127.0.0.1", 0, workers=4)
        server.start()
        self.addCleanup(lambda: server.stop(0).wait(5))
        c = Client(port, settings=struct.pack(">HI", 0x4, 100))  # INITIAL_WINDOW_SIZE 100
        self.addCleanup(c.close)
        n = 200  # a reset answer of 200 x 4 floats: ~3.2 kB
        c.send(c.headers(1, SESSION) + frame(DATA, 0, 1, grpc_msg(open_req(n))))
        got = [0]
        window = [100]

        def on_data(p):
            got[0] += len(p)
            self.assertLessEqual(got[0], window[0], "sent past the window")
            window[0] += len(p)
            c.send(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", len(p))))

        _, msgs, _, _ = c.call(1, want_messages=1, on_data=on_data)
        self.assertEqual(msgs[0].open.num_envs, n)
        got[0], window[0] = 0, 100
        c.send(frame(DATA, 0, 1, grpc_msg(env_pb2.EnvRequest(reset=env_pb2.ResetRequest()))))
        _, msgs, _, _ = c.call(1, want_messages=1, on_data=on_data)
        self.assertEqual(len(msgs[0].batch.obs), 4 * n)

    def test_message_past_the_limit(self):
        _, _, c = self.start(max_bytes=1000)
        self.open_session(c, 1)
        c.send(frame(DATA, 0, 1, b"\x00" + struct.pack(">I", 5000) + b"\x00" * 100))
        _, _, trailers, _ = c.call(1)
        self.assertEqual(trailers[b"grpc-status"], b"8")  # RESOURCE_EXHAUSTED

    def test_concurrent_sessions_step_in_their_own_threads(self):
        _, _, c = self.start(factory=lambda: Closing(sleep_s=0.3))
        for sid in (1, 3, 5):
            self.open_session(c, sid)
            self.reset(c, sid)
        start = time.monotonic()
        c.send(b"".join(frame(DATA, 0, sid, grpc_msg(step_req([1.0]))) for sid in (1, 3, 5)))
        for sid in (1, 3, 5):
            _, msgs, _, _ = c.call(sid, want_messages=1)
            self.assertEqual(list(msgs[0].batch.rewards), [1.0])
        took = time.monotonic() - start
        self.assertLess(took, 0.8, "three 0.3 s steps took %.2f s: not overlapped" % took)

    def test_concurrency_limit(self):
        _, _, c = self.start(workers=1)
        self.open_session(c, 1)
        c.send(c.headers(3, SESSION) + frame(DATA, 0, 3, grpc_msg(open_req())))
        _, _, trailers, _ = c.call(3)
        self.assertEqual(trailers[b"grpc-status"], b"8")

    def test_graceful_stop(self):
        server, _, c = self.start()
        self.open_session(c, 1)
        self.reset(c, 1)
        done = server.stop(grace=5)
        ftype = None
        while ftype != GOAWAY:
            ftype, _, _, payload = c.read_frame()
        self.assertEqual(int.from_bytes(payload[:4], "big"), 1)  # the last stream it takes
        self.step(c, 1, [1.0])  # a running session goes on within the grace
        c.send(frame(DATA, END_STREAM, 1))
        _, _, trailers, _ = c.call(1)
        self.assertEqual(trailers[b"grpc-status"], b"0")
        self.assertTrue(done.wait(5))

    def test_grpcio_client_many_sessions(self):
        """16 sessions on one connection of grpcio's own client, steps of
        random length (0-2 ms), 150 steps each: every answer comes, in
        order, whichever thread reads the socket."""
        import random

        import grpc

        from herd_env._proto.herd.v1 import env_pb2_grpc

        class Counter(Trivial):
            def __init__(self):
                super().__init__(length=10 ** 9)
                self.rng = random.Random(7)

            def step(self, action):
                time.sleep(self.rng.random() * 0.002)
                self.t += 1
                return [float(self.t), float(action), 0.0, 0.0], 1.0, False, False, {}

        server, port, _ = self.start(factory=Counter, env_id="Trivial", workers=32)
        ch = grpc.insecure_channel("127.0.0.1:%d" % port)
        self.addCleanup(ch.close)
        stub = env_pb2_grpc.EnvServiceStub(ch)
        self.assertEqual(list(stub.Describe(env_pb2.DescribeRequest(), timeout=10).env_ids), ["Trivial"])
        errors = []

        def session(k):
            try:
                def reqs():
                    yield open_req()
                    yield env_pb2.EnvRequest(reset=env_pb2.ResetRequest())
                    for i in range(150):
                        yield step_req([float((i + k) % 2)])

                answers = list(stub.Session(reqs(), timeout=60))
                obs = [list(a.batch.obs)[:2] for a in answers[2:]]
                want = [[float(i + 1), float((i + k) % 2)] for i in range(150)]
                if obs != want:
                    errors.append("session %d: %s..." % (k, obs[:3]))
            except Exception as ex:  # noqa: BLE001 - reported below
                errors.append("session %d: %r" % (k, ex))

        threads = [threading.Thread(target=session, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        self.assertEqual(errors, [])


if __name__ == "__main__":
    unittest.main()
