"""herd_env.shm serving a multi-agent env (pyparallel.LineWalk) in-process:
framed messages only, answers as over gRPC, a session's slot freed when its
client goes away.

    cd python && PYTHONPATH=.:tests python3 -m unittest test_shm_parallel
"""

import os
import socket
import struct
import sys
import time
import unittest

from herd_env import PROTOCOL_VERSION
from herd_env._proto.herd.v1 import env_pb2
from herd_env.parallel import servicer_for
from herd_env.shm import ShmServer, socket_name

import pyparallel


def _send(c, req):
    body = req.SerializeToString()
    c.sendall(b"P" + struct.pack("<I", len(body)) + body)


def _recv(c):
    buf = b""
    while len(buf) < 5:
        chunk = c.recv(5 - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    if buf[:1] != b"P":
        raise AssertionError("answer byte %r" % buf[:1])
    (size,) = struct.unpack("<I", buf[1:])
    body = b""
    while len(body) < size:
        body += c.recv(size - len(body))
    return env_pb2.EnvResponse.FromString(body)


def _open(n):
    return env_pb2.EnvRequest(open=env_pb2.OpenRequest(protocol_version=PROTOCOL_VERSION, env_id="LineWalk",
                                                       num_envs=n, autoreset=True, parallel=True))


def _step(*maps):
    req = env_pb2.EnvRequest()
    for m in maps:
        e = req.parallel_step.envs.add()
        for a, v in m.items():
            e.actions[a].values.append(v)
    return req


@unittest.skipUnless(sys.platform.startswith("linux"), "shm needs Linux")
class ShmParallelTest(unittest.TestCase):
    def setUp(self):
        self.name = "pytest-ma-%d-%s" % (os.getpid(), self._testMethodName)
        self.srv = ShmServer(servicer_for(pyparallel.LineWalk, "LineWalk", 64), self.name, max_sessions=2)
        self.srv.start()

    def tearDown(self):
        self.srv.stop()

    def dial(self):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(20)
        c.connect(socket_name(self.name))
        self.addCleanup(c.close)
        return c

    def test_steps_as_the_env(self):
        c = self.dial()
        _send(c, _open(2))
        spaces = _recv(c).open.parallel.agents
        self.assertEqual([a.agent for a in spaces], ["walker_0", "walker_1", "runner"])
        _send(c, env_pb2.EnvRequest(reset=env_pb2.ResetRequest(seeds=[4, 9])))
        got = _recv(c).parallel_batch
        envs = [pyparallel.LineWalk(), pyparallel.LineWalk()]
        for i, seed in enumerate((4, 9)):
            obs, _ = envs[i].reset(seed=seed)
            self.assertEqual({a: list(v.values) for a, v in got.envs[i].obs.items()}, obs)
        dones = 0
        for k in range(8):  # max_cycles 6: every env's episode ends
            acts = [{a: float((k + j) % 3) for j, a in enumerate(e.agents)} for e in envs]
            _send(c, _step(*acts))
            got = _recv(c).parallel_batch
            for i, e in enumerate(envs):
                obs, rew, _, _, _ = e.step({a: int(v) for a, v in acts[i].items()})
                self.assertEqual({a: t.reward for a, t in got.envs[i].transitions.items()}, rew)
                if e.agents:
                    self.assertEqual(list(got.envs[i].agents), e.agents)
                    self.assertEqual({a: list(v.values) for a, v in got.envs[i].obs.items()}, obs)
                else:  # autoreset: a new episode, the last observations final
                    self.assertTrue(got.envs[i].done)
                    self.assertEqual({a: list(v.values) for a, v in got.envs[i].final_obs.items()}, obs)
                    e.reset(seed=None)
                    dones += 1
        self.assertGreater(dones, 1)
        # A bad action is answered in-band; the session goes on.
        live = [list(e.agents) for e in envs]
        _send(c, _step({a: 7.0 for a in live[0]}, {a: 1.0 for a in live[1]}))
        self.assertEqual(_recv(c).error.reason, "INVALID_ACTION")
        _send(c, _step({a: 1.0 for a in live[0]}, {a: 1.0 for a in live[1]}))
        self.assertTrue(_recv(c).HasField("parallel_batch"))
        # A segment's step byte ends the session.
        c.sendall(b"S")
        e = _recv(c).error
        self.assertEqual((e.code, e.reason), (3, ""))  # INVALID_ARGUMENT, ending
        self.assertEqual(c.recv(1), b"")

    def test_session_freed(self):
        for _ in range(5):  # max_sessions 2: each vanished client frees its slot
            c = self.dial()
            _send(c, _open(1))
            self.assertTrue(_recv(c).HasField("open"))
            c.close()
            deadline = time.monotonic() + 10
            while self.srv.live and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertFalse(self.srv.live)


if __name__ == "__main__":
    unittest.main()
