"""CPU time of herd_env's own work per step message (of --num-envs envs,
default 1), without any transport, so that it can be told apart from the
transport's cost on a busy machine (thread CPU time, not wall time):

- envs: the same envs stepped with the same actions in a plain loop
  (reset when an episode ends), the floor the others add to;
- shm: one step as the shm session runs it between its recv and its send
  (actions out of the segment, step_lists: the steps and the results into the segment,
  the step counter);
- grpc: parsing the step request and answering it serialized, as
  EnvServicer.Session does (herd_env.stepwire), which is what herd_env.serve
  adds to the gRPC server's own per-message work; "grpc protobuf" is the
  same through protobuf's messages (EnvServicer.handle), "canned" parsing
  and serializing a prebuilt answer (python/tests/grpc_floor.py --canned);
- syscalls: a 1-byte send and a 1-byte recv on a Unix socket pair with the
  byte already there (the shm session's two system calls per step, minus
  any sleeping and waking, as they were before the wake pipes);
- pipe syscalls: the same on a pipe (the two per step on the wake pipes).

With --chunk K each figure is the least over runs of K messages, which
other processes on the machine inflate the least.

    cd python && PYTHONPATH=.:tests python3 tests/step_cost.py [--env herd_env.testenvs:Trivial]
    PYTHONPATH=.:tests:GYMNASIUM_SRC python3 tests/step_cost.py --env gymnasium:make \
        --kwargs '{"id": "CartPole-v1"}' --num-envs 8 --steps 10000 --chunk 50
"""

import argparse
import json
import os
import socket
import time

from herd_env import serve, stepwire
from shmtest import segment
from herd_env._proto.herd.v1 import env_pb2


def per_call_us(fn, n, chunk=0):
    """CPU µs per call of fn over n calls; with chunk, the least over runs
    of chunk calls, which a busy machine inflates the least."""
    if chunk <= 0:
        t0 = time.thread_time_ns()
        fn(n)
        return (time.thread_time_ns() - t0) / n / 1e3
    best = None
    for _ in range(max(1, n // chunk)):
        t0 = time.thread_time_ns()
        fn(chunk)
        dt = time.thread_time_ns() - t0
        best = dt if best is None else min(best, dt)
    return best / chunk / 1e3


def main():
    p = argparse.ArgumentParser(prog="step_cost.py")
    p.add_argument("--env", default="herd_env.testenvs:Trivial")
    p.add_argument("--kwargs", default="{}", help="JSON keyword arguments for --env")
    p.add_argument("--num-envs", type=int, default=1, help="envs per step message (figures are per message)")
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chunk", type=int, default=0,
                   help="report the least CPU time over runs of this many messages (0: the mean over all)")
    args = p.parse_args()
    sv = serve.EnvServicer(serve.load_factory(args.env, json.loads(args.kwargs)), "E")
    open_req = env_pb2.EnvRequest(open=env_pb2.OpenRequest(
        protocol_version=serve.PROTOCOL_VERSION, env_id="E", num_envs=args.num_envs, autoreset=True))
    sess, bad = sv.open(open_req)
    if bad is not None:
        raise SystemExit("open: %s" % (bad,))
    sess.reset(list(range(args.num_envs)))
    n, od, ad = args.num_envs, sess.obs_codec.dim, sess.act_codec.dim
    seg = segment(n, od, ad, "herd-step-cost")
    for i in range(n * ad):
        seg.act[i] = float(i % 2 if sess.act_codec.kind == "Discrete" else 0)  # valid for Discrete and Box alike

    def shm_step(k):
        step, act, req_seq, resp_seq = sess.step_lists, seg.act, seg.req_seq, seg.resp_seq
        for _ in range(k):
            step(act.tolist(), seg)
            resp_seq[0] = req_seq[0]

    rows = sess.act_codec.rows(seg.act.tolist(), n)

    def envs_only(k):  # the floor: the same envs and actions, stepped in a plain loop
        pairs = list(zip(sess.envs, rows))
        for _ in range(k):
            for e, a in pairs:
                _, _, term, trunc, _ = e.step(a)
                if term or trunc:
                    e.reset()

    raw = env_pb2.EnvRequest(step=env_pb2.StepRequest(actions=seg.act.tolist())).SerializeToString()
    canned = sv.handle(sess, env_pb2.EnvRequest.FromString(raw))[0]

    def grpc_step(k):  # as EnvServicer.Session answers a step
        parse, step = stepwire.parse_step, sess.step_wire
        for _ in range(k):
            step(parse(raw))

    def grpc_protobuf(k):  # the same through protobuf's messages
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
        parts = ["%s %.2f" % (name, per_call_us(fn, args.steps, args.chunk)) for name, fn in
                 (("envs", envs_only), ("shm", shm_step), ("grpc", grpc_step), ("grpc protobuf", grpc_protobuf), ("canned", grpc_canned), ("syscalls", syscalls),
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
