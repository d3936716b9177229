"""CPU time of herd_env's own work per 1-env step message, without any
transport, so that it can be told apart from the transport's cost on a busy
machine (thread CPU time, not wall time):

- shm: one step as the shm session runs it between its recv and its send
  (actions out of the segment, step_lists, the results into the segment,
  the step counter);
- grpc: parsing the EnvRequest, answering it (EnvServicer.handle) and
  serializing the EnvResponse, which is what herd_env.serve adds to
  grpcio's own per-message work; "canned" is parsing and serializing a
  prebuilt answer (python/tests/grpc_floor.py --canned);
- syscalls: a 1-byte send and a 1-byte recv on a Unix socket pair with the
  byte already there (the shm session's two system calls per step, minus
  any sleeping and waking, as they were before the wake pipes);
- pipe syscalls: the same on a pipe (the two per step on the wake pipes).

    cd python && PYTHONPATH=.:tests python3 tests/step_cost.py [--env herd_env.testenvs:Trivial]
"""

import argparse
import mmap
import os
import socket
import struct
import time

from herd_env import serve, shm
from herd_env._proto.herd.v1 import env_pb2


def per_call_us(fn, n):
    t0 = time.thread_time_ns()
    fn(n)
    return (time.thread_time_ns() - t0) / n / 1e3


def main():
    p = argparse.ArgumentParser(prog="step_cost.py")
    p.add_argument("--env", default="herd_env.testenvs:Trivial")
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    sv = serve.EnvServicer(serve.load_factory(args.env, {}), "E")
    open_req = env_pb2.EnvRequest(open=env_pb2.OpenRequest(
        protocol_version=serve.PROTOCOL_VERSION, env_id="E", num_envs=1, autoreset=True))
    sess, bad = sv.open(open_req)
    if bad is not None:
        raise SystemExit("open: %s" % (bad,))
    sess.reset([])
    n, od, ad = 1, sess.obs_codec.dim, sess.act_codec.dim
    size = shm.layout(n, od, ad)[-1]
    fd = os.memfd_create("herd-step-cost")
    os.ftruncate(fd, size)
    with mmap.mmap(fd, size) as m:
        m[:8] = shm.MAGIC
        struct.pack_into("<3I", m, 8, n, od, ad)
    seg = shm._Segment(fd, n, od, ad)
    os.close(fd)
    seg.act[0] = 0.0  # a valid action for Discrete and Box alike

    def shm_step(k):
        step_lists, write, act, req_seq, resp_seq = sess.step_lists, seg.write, seg.act, seg.req_seq, seg.resp_seq
        for _ in range(k):
            r = step_lists(act.tolist())
            write(*r)
            resp_seq[0] = req_seq[0]

    raw = env_pb2.EnvRequest(step=env_pb2.StepRequest(actions=[0.0] * ad)).SerializeToString()
    canned = sv.handle(sess, env_pb2.EnvRequest.FromString(raw))[0]

    def grpc_step(k):
        parse, handle = env_pb2.EnvRequest.FromString, sv.handle
        for _ in range(k):
            handle(sess, parse(raw))[0].SerializeToString()

    def grpc_canned(k):
        parse = env_pb2.EnvRequest.FromString
        for _ in range(k):
            parse(raw)
            canned.SerializeToString()

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def syscalls(k):
        send, recv = a.send, b.recv
        for _ in range(k):  # a few bytes queued at a time, as the buffer allows
            send(b"s")
            recv(1)

    pr, pw = os.pipe()

    def pipe_syscalls(k):
        write, read = os.write, os.read
        for _ in range(k):
            write(pw, b"s")
            read(pr, 1)

    for rep in range(args.repeats):
        parts = ["%s %.2f" % (name, per_call_us(fn, args.steps)) for name, fn in
                 (("shm", shm_step), ("grpc", grpc_step), ("canned", grpc_canned), ("syscalls", syscalls),
                  ("pipe syscalls", pipe_syscalls))]
        print("step_cost %s: us of CPU per message: %s" % (args.env, ", ".join(parts)), flush=True)
    seg.close()
    sess.close()
    a.close()
    b.close()
    os.close(pr)
    os.close(pw)


if __name__ == "__main__":
    main()
