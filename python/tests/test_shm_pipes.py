"""herd_env.shm's wake pipes: a client that offers them (header flag) gets
'w', hands over two pipes and then steps on them; one that does not keeps
the socket; both step CartPole to the same bits; a client that goes away
ends its session (the server holds no pipe or segment after it).

    cd python && PYTHONPATH=.:tests python3 -m unittest test_shm_pipes
"""

import mmap
import os
import random
import socket
import struct
import sys
import time
import unittest

from herd_env import PROTOCOL_VERSION, serve, shm
from herd_env._proto.herd.v1 import env_pb2


def _frame(req):
    body = req.SerializeToString()
    return b"P" + struct.pack("<I", len(body)) + body


class _Client:
    """A minimal shm client: the Go client's protocol (env/remote/shm_linux.go)."""

    def __init__(self, name, n, pipes):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(20)
        self.sock.connect(shm.socket_name(name))
        self.rfd = self.wfd = None
        self.n = n
        self.sock.sendall(_frame(env_pb2.EnvRequest(open=env_pb2.OpenRequest(
            protocol_version=PROTOCOL_VERSION, env_id="CartPole", num_envs=n, autoreset=True))))
        opened = self.read_msg()
        if opened.HasField("error"):
            raise AssertionError("open: %s" % opened.error.message)
        self.od, self.ad = 4, 1
        act, obs, final, rew, lives, term, trunc, size = shm.layout(n, self.od, self.ad)
        self.off = dict(act=act, obs=obs, rew=rew, term=term, trunc=trunc)
        fd = os.memfd_create("herd-env")
        os.ftruncate(fd, size)
        self.mm = mmap.mmap(fd, size)
        shm.write_header(self.mm, n, self.od, self.ad)
        struct.pack_into("<I", self.mm, shm.FLAGS, shm.FLAG_PIPES if pipes else 0)
        self.sock.sendall(b"M")
        socket.send_fds(self.sock, [b"F"], [fd])
        os.close(fd)
        self.answer = self.read(1)
        if self.answer == b"w":
            req_r, req_w = os.pipe()
            ans_r, ans_w = os.pipe()
            socket.send_fds(self.sock, [b"F"], [req_r, ans_w])
            os.close(req_r)
            os.close(ans_w)
            self.rfd, self.wfd = ans_r, req_w
            self.answer += self.read(1)
        self.seq = 0

    def read(self, k):
        if self.rfd is None:
            return shm._recv_exact(self.sock.recv, k)
        return shm._recv_exact(lambda m: os.read(self.rfd, m), k)

    def write(self, data):
        if self.wfd is None:
            self.sock.sendall(data)
        else:
            os.write(self.wfd, data)

    def read_msg(self):
        tag = self.read(1)
        if tag != b"P":
            raise AssertionError("answer byte %r, want P" % tag)
        (size,) = struct.unpack("<I", self.read(4))
        return env_pb2.EnvResponse.FromString(self.read(size))

    def reset(self, seeds):
        self.write(_frame(env_pb2.EnvRequest(reset=env_pb2.ResetRequest(seeds=seeds))))
        return list(self.read_msg().batch.obs)

    def step(self, actions):
        struct.pack_into("<%df" % self.n, self.mm, self.off["act"], *actions)
        self.seq += 1
        struct.pack_into("<I", self.mm, 24, self.seq)
        self.write(b"S")
        tag = self.read(1)
        if tag != b"s":
            raise AssertionError("step answer byte %r" % tag)
        o = self.off
        return bytes(self.mm[o["obs"]:o["obs"] + 4 * self.n * self.od]) + bytes(self.mm[o["rew"]:o["trunc"] + self.n])

    def close(self):
        for fd in (self.rfd, self.wfd):
            if fd is not None:
                os.close(fd)
        self.sock.close()
        self.mm.close()


def _pipes_held():
    """How many pipe ends this process holds."""
    k = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            k += os.readlink("/proc/self/fd/" + fd).startswith("pipe:")
        except OSError:
            pass
    return k


@unittest.skipUnless(sys.platform.startswith("linux"), "shm needs Linux")
class ShmPipesTest(unittest.TestCase):
    def setUp(self):
        self.name = "pytest-pipes-%d-%s" % (os.getpid(), self._testMethodName)
        factory = serve.load_factory("pycartpole:CartPole", {})
        self.srv = shm.ShmServer(serve.EnvServicer(factory, "CartPole"), self.name, max_sessions=4)
        self.srv.start()

    def tearDown(self):
        self.srv.stop()

    def wait_sessions(self, want):
        deadline = time.monotonic() + 10
        while len(self.srv.live) != want:
            if time.monotonic() > deadline:
                self.fail("%d live sessions, want %d" % (len(self.srv.live), want))
            time.sleep(0.01)

    def trace(self, pipes):
        c = _Client(self.name, 3, pipes)
        try:
            self.assertEqual(c.answer, b"wm" if pipes else b"m")
            rng = random.Random(7)
            out = [struct.pack("<12f", *c.reset([1, 2, 3]))]
            for _ in range(300):
                out.append(c.step([rng.randrange(2) for _ in range(3)]))
            out.append(struct.pack("<12f", *c.reset([4, 5, 6])))  # a framed request on the pipes
            return out
        finally:
            c.close()

    def test_pipes_and_socket_step_the_same_bits(self):
        self.assertEqual(self.trace(True), self.trace(False))

    def test_client_gone_ends_session(self):
        before = _pipes_held()
        c = _Client(self.name, 2, True)
        c.reset([1, 2])
        c.step([0, 1])
        self.wait_sessions(1)
        # The client's two ends here, the server's two in its session.
        self.assertEqual(_pipes_held() - before, 4)
        c.close()
        self.wait_sessions(0)
        self.assertEqual(_pipes_held(), before)

    def test_stopped_server_ends_pipe_session(self):
        c = _Client(self.name, 1, True)
        try:
            c.reset([1])
            c.step([1])
            self.srv.stop()
            c.write(b"S")
            self.assertEqual(os.read(c.rfd, 1), b"")  # EOF: the session ended
            self.wait_sessions(0)
        finally:
            c.close()


if __name__ == "__main__":
    unittest.main()
