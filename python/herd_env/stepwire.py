"""The step message pair in protobuf's wire format, without protobuf.

A session's step request (EnvRequest{step: StepRequest{actions}}) and its
answer (EnvResponse{batch: Batch{...}}) are most of what a gRPC session
sends. Parsing the one and building and serializing the other through
protobuf's Python objects costs about 7.5 µs of CPU a message with 1 env,
and struct about 1.5 (python/tests/step_cost.py: "grpc" against "grpc
protobuf"), out of a 1-env round trip of about 40 µs over --grpc-impl h2.
Only the canonical encoding is taken (the one gRPC-Go and protobuf write:
packed, fields in order, nothing else): parse_step answers None for
anything else, which then goes through protobuf, and Batcher.batch gives
the bytes protobuf's serializer gives (python/tests/test_stepwire.py).
"""

import struct

_TAG_STEP = 0x1A  # EnvRequest.step: field 3, length-delimited
_TAG_ACTIONS = 0x0A  # StepRequest.actions: field 1, packed floats


def _varint(b, pos):
    """(value, next position) of the varint at b[pos:], or (-1, 0)."""
    v = shift = 0
    n = len(b)
    while pos < n and shift < 35:
        c = b[pos]
        pos += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, pos
        shift += 7
    return -1, 0


def _put_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def parse_step(b):
    """The actions of a serialized EnvRequest holding a step, as a list of
    floats; None when b is not one in the canonical encoding."""
    if len(b) < 2 or b[0] != _TAG_STEP:
        return None
    if len(b) >= 4 and b[1] < 0x80 and b[2] == _TAG_ACTIONS and b[3] < 0x80:
        # Under 32 actions: one-byte lengths.
        m = b[3]
        if b[1] != len(b) - 2 or m + 4 != len(b) or m % 4:
            return None
        return list(struct.unpack_from("<%df" % (m >> 2), b, 4))
    n, pos = _varint(b, 1)
    if n < 0 or pos + n != len(b):
        return None
    if n == 0:
        return []
    if b[pos] != _TAG_ACTIONS:
        return None
    m, start = _varint(b, pos + 1)
    if m < 0 or start + m != len(b) or m % 4:
        return None
    return list(struct.unpack_from("<%df" % (m >> 2), b, start))


def _head(tag, size):
    """A field's tag and length, or nothing for an empty field (protobuf
    writes no empty packed field)."""
    return tag + _put_varint(size) if size else b""


def _batch_struct(no, nr, nt, nu, nf):
    """The Struct packing a Batch of these lengths (the field heads as
    bytes arguments, then the values), and the heads."""
    heads = (_head(b"\x0a", 4 * no), _head(b"\x12", 8 * nr), _head(b"\x1a", nt), _head(b"\x22", nu),
             _head(b"\x2a", 4 * nf))
    body = sum(len(h) for h in heads) + 4 * no + 8 * nr + nt + nu + 4 * nf
    top = b"\x12" + _put_varint(body)
    fmt = "<%ds%ds%df%ds%dd%ds%d?%ds%d?%ds%df" % (len(top), len(heads[0]), no, len(heads[1]), nr, len(heads[2]), nt,
                                                len(heads[3]), nu, len(heads[4]), nf)
    return struct.Struct(fmt), (top,) + heads


class Batcher:
    """Serializes Batches; keeps the Struct of each shape it has seen (a
    session sees a few: its envs, and how many of them ended an episode
    in a step)."""

    MAX_SHAPES = 64

    def __init__(self):
        self._shapes = {}

    def batch(self, obs, rewards, terminated, truncated, final_obs):
        """A serialized EnvResponse holding Batch(obs, rewards, terminated,
        truncated, final_obs) (lists of floats and bools), as protobuf
        writes it; None when a value does not pack as its field's type (an
        observation past float32's range, which protobuf makes an
        infinity): the caller then uses protobuf."""
        key = (len(obs), len(rewards), len(terminated), len(truncated), len(final_obs))
        got = self._shapes.get(key)
        if got is None:
            if len(self._shapes) >= self.MAX_SHAPES:
                self._shapes.clear()
            got = self._shapes[key] = _batch_struct(*key)
        st, (top, h0, h1, h2, h3, h4) = got
        try:
            return st.pack(top, h0, *obs, h1, *rewards, h2, *terminated, h3, *truncated, h4, *final_obs)
        except (OverflowError, struct.error):
            return None
