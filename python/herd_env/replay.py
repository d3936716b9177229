"""Python client of herd's replay service (`herd serve replay`, protocol
herd.v1 ReplayService).

    from herd_env.replay import ReplayClient
    c = ReplayClient("127.0.0.1:7100")
    c.push([("step-1", b"...", {"priority": 1.0}), ("step-2", b"...", {"priority": 0.5})])
    for key, value in c.sample(32, sampler="per"):
        ...
    c.update_priorities("priority", ["step-1"], [0.1])

Every call has a deadline (timeout, default 30 s) and raises grpc.RpcError
with the server's status code on failure. One client may be used from many
threads.
"""

import grpc

from . import PROTOCOL_VERSION
from ._proto.herd.v1 import replay_pb2, replay_pb2_grpc

MAX_MESSAGE_BYTES = 64 << 20


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class ReplayClient:
    def __init__(self, target, timeout=30.0, ca=None, cert=None, key=None, max_message_bytes=MAX_MESSAGE_BYTES):
        """Connects to target ("host:port"); TLS when ca is given (cert and key
        add a client certificate for servers that require one)."""
        opts = [("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", max_message_bytes)]
        if ca or cert or key:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(ca) if ca else None,
                private_key=_read(key) if key else None,
                certificate_chain=_read(cert) if cert else None)
            self._channel = grpc.secure_channel(target, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(target, options=opts)
        self._stub = replay_pb2_grpc.ReplayServiceStub(self._channel)
        self.timeout = timeout

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def describe(self):
        return self._stub.Describe(replay_pb2.ReplayDescribeRequest(protocol_version=PROTOCOL_VERSION),
                                   timeout=self.timeout)

    def push(self, records):
        """Upserts records, an iterable of (key, value bytes, fields dict or
        None), in order; returns how many were pushed."""
        req = replay_pb2.PushRequest(protocol_version=PROTOCOL_VERSION)
        for key, value, fields in records:
            req.records.add(key=key, value=value, fields=fields or {})
        return self._stub.Push(req, timeout=self.timeout).pushed

    def get(self, keys, with_fields=False):
        """Returns [(key, value, fields)] for keys, in order."""
        resp = self._stub.Get(replay_pb2.GetRequest(protocol_version=PROTOCOL_VERSION, keys=list(keys),
                                                    with_fields=with_fields), timeout=self.timeout)
        return [(r.key, r.value, dict(r.fields)) for r in resp.records]

    def sample(self, n, sampler=""):
        """Draws n records with the named sampler ("" for the server's first);
        returns [(key, value)]."""
        resp = self._stub.Sample(replay_pb2.SampleRequest(protocol_version=PROTOCOL_VERSION, n=n, sampler=sampler),
                                 timeout=self.timeout)
        return [(r.key, r.value) for r in resp.records]

    def update_priorities(self, field, keys, priorities):
        """Sets field to priorities[i] on keys[i]; returns how many."""
        req = replay_pb2.UpdatePrioritiesRequest(protocol_version=PROTOCOL_VERSION, field=field, keys=list(keys),
                                                 priorities=list(priorities))
        return self._stub.UpdatePriorities(req, timeout=self.timeout).updated

    def snapshot(self):
        return self._stub.Snapshot(replay_pb2.SnapshotRequest(protocol_version=PROTOCOL_VERSION), timeout=self.timeout)

    def flush(self):
        """Return once every record pushed before is durable on the server's disk; the store's size."""
        resp = self._stub.Flush(replay_pb2.FlushRequest(protocol_version=PROTOCOL_VERSION), timeout=self.timeout)
        return resp.len
