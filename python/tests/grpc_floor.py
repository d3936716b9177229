"""Measures what grpcio itself costs per Session message, for comparison
with herd_env.serve: serves herd.v1 EnvService's Session stream on grpcio's
synchronous server (as herd_env.serve does) or on grpc.aio, stepping the
env or (--canned) answering every step with the first step's response, so
that the round trip is grpcio's own floor.

    PYTHONPATH=.:tests python3 tests/grpc_floor.py --env herd_env.testenvs:Trivial \\
        --mode sync|aio [--canned] --port 0

then, for example, herd bench remote env --addr 127.0.0.1:PORT --id Trivial.
"""

import argparse
import asyncio
import sys

import grpc

from herd_env import serve
from herd_env._proto.herd.v1 import env_pb2_grpc


class SyncFloor(serve.EnvServicer):
    """herd_env.serve's servicer, with --canned step answers."""

    def __init__(self, factory, env_id, canned):
        super().__init__(factory, env_id)
        self.canned = canned

    def Session(self, request_iterator, context):
        first = next(request_iterator, None)
        if first is None:
            return
        sess, bad = self.open(first)
        if bad is not None:
            context.abort(*bad)
        try:
            yield sess.open_response()
            canned = None
            for req in request_iterator:
                if self.canned and req.WhichOneof("msg") == "step" and canned is not None:
                    yield canned
                    continue
                resp, bad = self.handle(sess, req)
                if bad is not None:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, bad)
                if req.WhichOneof("msg") == "step":
                    canned = resp
                yield resp
        finally:
            sess.close()


class AioFloor(env_pb2_grpc.EnvServiceServicer):
    """The same Session on grpc.aio: the env steps in the event loop's
    thread (a slow env would stall every other session)."""

    def __init__(self, inner, canned):
        self.inner, self.canned = inner, canned

    async def Describe(self, request, context):
        return self.inner.Describe(request, context)

    async def Session(self, request_iterator, context):
        first = await context.read()
        if first is grpc.aio.EOF:
            return
        sess, bad = self.inner.open(first)
        if bad is not None:
            await context.abort(*bad)
        try:
            await context.write(sess.open_response())
            canned = None
            while True:
                req = await context.read()
                if req is grpc.aio.EOF:
                    return
                if self.canned and req.WhichOneof("msg") == "step" and canned is not None:
                    await context.write(canned)
                    continue
                resp, bad = self.inner.handle(sess, req)
                if bad is not None:
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, bad)
                if req.WhichOneof("msg") == "step":
                    canned = resp
                await context.write(resp)
        finally:
            sess.close()


async def _serve_aio(servicer, host, port):
    s = grpc.aio.server()
    env_pb2_grpc.add_EnvServiceServicer_to_server(servicer, s)
    bound = s.add_insecure_port("%s:%d" % (host, port))
    await s.start()
    print("grpc_floor: serving (aio) on port %d" % bound, flush=True)
    await s.wait_for_termination()


def main(argv=None):
    p = argparse.ArgumentParser(prog="grpc_floor.py")
    p.add_argument("--env", required=True)
    p.add_argument("--id")
    p.add_argument("--mode", choices=("sync", "aio"), default="sync")
    p.add_argument("--canned", action="store_true", help="answer steps with the first step's response")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    factory = serve.load_factory(args.env, {})
    env_id = args.id or args.env.partition(":")[2]
    if args.mode == "aio":
        asyncio.run(_serve_aio(AioFloor(serve.EnvServicer(factory, env_id), args.canned), args.host, args.port))
        return 0
    servicer = SyncFloor(factory, env_id, args.canned)
    server, port = serve.make_server(lambda s: env_pb2_grpc.add_EnvServiceServicer_to_server(servicer, s),
                                     args.host, args.port)
    serve.run_until_signal(server, "grpc_floor (sync)", port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
