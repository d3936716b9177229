"""grpcio's own per-message floor for each way of serving a step: a unary
call per step or a message pair on one bidirectional stream, on grpcio's
synchronous server (a thread pool, as herd_env.serve) or on grpc.aio. Every
call is answered with the same prebuilt bytes (a serialized 1-env step
EnvResponse) and requests are not parsed, so what is left is grpcio's work.

    PYTHONPATH=.:tests python3 -m grpc_modes --mode sync|aio --port 0

serves /floor.F/Unary (unary-unary), /floor.F/Stream (stream-stream, a
generator on sync, an async generator on aio) and, on aio, /floor.F/StreamRW
(stream-stream with context.read/write). The Go client is
BenchmarkGrpcioModes in service/envsvc, which also reads this process's CPU
time per call from /proc.
"""

import argparse
import asyncio
import sys
from concurrent import futures

import grpc

from herd_env._proto.herd.v1 import env_pb2

CANNED = env_pb2.EnvResponse(batch=env_pb2.Batch(
    obs=[0.01, -0.02, 0.03, -0.04], rewards=[1.0], terminated=[False], truncated=[False])).SerializeToString()


def _same(b):
    return b


def _handler(methods):
    return grpc.method_handlers_generic_handler("floor.F", {
        name: grpc.unary_unary_rpc_method_handler(fn, request_deserializer=_same, response_serializer=_same)
        if kind == "unary" else
        grpc.stream_stream_rpc_method_handler(fn, request_deserializer=_same, response_serializer=_same)
        for name, (kind, fn) in methods.items()})


def serve_sync(host, port):
    def unary(req, ctx):
        return CANNED

    def stream(it, ctx):
        for _ in it:
            yield CANNED

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((_handler({"Unary": ("unary", unary), "Stream": ("stream", stream)}),))
    bound = server.add_insecure_port("%s:%d" % (host, port))
    server.start()
    print("grpc_modes: serving (sync) on port %d" % bound, flush=True)
    server.wait_for_termination()


async def serve_aio(host, port):
    async def unary(req, ctx):
        return CANNED

    async def stream(it, ctx):
        async for _ in it:
            yield CANNED

    async def stream_rw(it, ctx):
        while True:
            if await ctx.read() is grpc.aio.EOF:
                return
            await ctx.write(CANNED)

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_handler({"Unary": ("unary", unary), "Stream": ("stream", stream),
                                               "StreamRW": ("stream", stream_rw)}),))
    bound = server.add_insecure_port("%s:%d" % (host, port))
    await server.start()
    print("grpc_modes: serving (aio) on port %d" % bound, flush=True)
    await server.wait_for_termination()


def main(argv=None):
    p = argparse.ArgumentParser(prog="grpc_modes")
    p.add_argument("--mode", choices=("sync", "aio"), default="sync")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    if args.mode == "aio":
        asyncio.run(serve_aio(args.host, args.port))
    else:
        serve_sync(args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
