"""herd_env.stepwire against protobuf: the same bytes, the same values."""

import math
import random
import struct
import unittest

import grpc

from herd_env import PROTOCOL_VERSION, serve, stepwire
from herd_env._proto.herd.v1 import env_pb2
from herd_env.testenvs import Trivial


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _response(obs, rewards, terms, truncs, final):
    resp = env_pb2.EnvResponse()
    b = resp.batch
    b.obs.extend(obs)
    b.rewards.extend(rewards)
    b.terminated.extend(terms)
    b.truncated.extend(truncs)
    b.final_obs.extend(final)
    return resp.SerializeToString()


class StepWireTest(unittest.TestCase):
    def test_batch_bytes_match_protobuf(self):
        rng = random.Random(7)
        bat = stepwire.Batcher()
        # 1 env up to enough envs for three-byte lengths; float32 values
        # (as observations from float32 arrays are) and doubles that round.
        for n, dim in ((1, 4), (3, 1), (8, 4), (40, 17), (1000, 3), (5000, 4)):
            for ended in (0, 1, n):
                obs = [rng.uniform(-5, 5) for _ in range(n * dim)]
                rewards = [rng.choice((1.0, -0.5, 1e300, 0.0)) for _ in range(n)]
                terms = [i < ended and i % 2 == 0 for i in range(n)]
                truncs = [i < ended and i % 2 == 1 for i in range(n)]
                final = [_f32(rng.uniform(-1, 1)) for _ in range(ended * dim)]
                got = bat.batch(obs, rewards, terms, truncs, final)
                want = _response(obs, rewards, terms, truncs, final)
                self.assertEqual(got, want, "n=%d dim=%d ended=%d" % (n, dim, ended))

    def test_batch_special_values(self):
        bat = stepwire.Batcher()
        obs = [math.inf, -math.inf, 0.0, -0.0, 3.4028234663852886e38, 1e-45]
        got = bat.batch(obs, [math.inf], [True], [False], [])
        self.assertEqual(got, _response(obs, [math.inf], [True], [False], []))
        # NaN: the client reads NaN either way (payload bits may differ).
        parsed = env_pb2.EnvResponse.FromString(bat.batch([math.nan], [math.nan], [False], [True], [math.nan]))
        self.assertTrue(math.isnan(parsed.batch.obs[0]) and math.isnan(parsed.batch.rewards[0]))
        self.assertTrue(math.isnan(parsed.batch.final_obs[0]))
        self.assertEqual(list(parsed.batch.truncated), [True])

    def test_batch_out_of_float32_range_is_left_to_protobuf(self):
        self.assertIsNone(stepwire.Batcher().batch([1e39], [1.0], [False], [False], []))

    def test_batch_shape_cache_is_bounded(self):
        bat = stepwire.Batcher()
        for n in range(1, 3 * stepwire.Batcher.MAX_SHAPES):
            self.assertEqual(bat.batch([0.5] * n, [1.0] * n, [False] * n, [True] * n, []),
                             _response([0.5] * n, [1.0] * n, [False] * n, [True] * n, []))
        self.assertLessEqual(len(bat._shapes), stepwire.Batcher.MAX_SHAPES)

    def test_parse_step_matches_protobuf(self):
        rng = random.Random(3)
        for k in (0, 1, 2, 31, 32, 33, 1000, 40000):
            acts = [_f32(rng.uniform(-3, 3)) for _ in range(k)]
            raw = env_pb2.EnvRequest(step=env_pb2.StepRequest(actions=acts)).SerializeToString()
            self.assertEqual(stepwire.parse_step(raw), acts, "k=%d" % k)

    def test_parse_step_refuses_what_is_not_a_canonical_step(self):
        reqs = [
            env_pb2.EnvRequest(reset=env_pb2.ResetRequest(seeds=[1, 2])).SerializeToString(),
            env_pb2.EnvRequest(open=env_pb2.OpenRequest(num_envs=3)).SerializeToString(),
            b"",
            b"\x1a",
            b"\x1a\x06\x0a\x04\x00\x00",  # shorter than its lengths say
            b"\x1a\x05\x0a\x03\x00\x00\x00",  # 3 bytes of floats
            b"\x1a\x05\x0d\x00\x00\x80\x3f",  # an unpacked float: legal protobuf, left to protobuf
            b"\x1a\x06\x0a\x04\x00\x00\x80\x3f\x10\x01",  # a field after the step
            b"\x1a\xff\xff\xff\xff\xff\xff",  # a varint past 35 bits
        ]
        for raw in reqs:
            self.assertIsNone(stepwire.parse_step(raw), raw)
        # The unpacked encoding still means actions [1.0] to protobuf.
        self.assertEqual(list(env_pb2.EnvRequest.FromString(b"\x1a\x05\x0d\x00\x00\x80\x3f").step.actions), [1.0])


class _Aborted(Exception):
    pass


class _Context:
    def abort(self, code, details):
        self.code, self.details = code, details
        raise _Aborted()


class _Big(Trivial):
    """Observations past float32's range after the first step."""

    def step(self, action):
        obs, r, term, trunc, info = super().step(action)
        return [1e39, 0.0, 0.0, 0.0], r, term, trunc, info


class SessionBytesTest(unittest.TestCase):
    """EnvServicer.Session takes and gives bytes: stepwire's answers are
    protobuf's, and what stepwire does not take goes through protobuf."""

    def run_session(self, env, raws):
        sv = serve.EnvServicer(env, "E")
        opened = env_pb2.EnvRequest(open=env_pb2.OpenRequest(
            protocol_version=PROTOCOL_VERSION, env_id="E", num_envs=2, autoreset=True)).SerializeToString()
        reset = env_pb2.EnvRequest(reset=env_pb2.ResetRequest(seeds=[1, 2])).SerializeToString()
        ctx = _Context()
        out = []
        try:
            for b in sv.Session(iter([opened, reset] + raws), ctx):
                self.assertIs(type(b), bytes)
                out.append(env_pb2.EnvResponse.FromString(b))
        except _Aborted:
            out.append(ctx)
        return out[2:]

    def test_canonical_and_unpacked_steps_answer_alike(self):
        canonical = env_pb2.EnvRequest(step=env_pb2.StepRequest(actions=[1.0, 0.0])).SerializeToString()
        unpacked = b"\x1a\x0a\x0d\x00\x00\x80\x3f\x0d\x00\x00\x00\x00"  # the same actions, one tag each
        self.assertIsNone(stepwire.parse_step(unpacked))
        self.assertEqual(list(env_pb2.EnvRequest.FromString(unpacked).step.actions), [1.0, 0.0])
        a, b = self.run_session(Trivial, [canonical, unpacked])
        self.assertEqual(a.WhichOneof("msg"), "batch")
        self.assertEqual(list(a.batch.rewards), [1.0, 1.0])
        self.assertEqual(a.SerializeToString(), b.SerializeToString())

    def test_invalid_action_is_answered_in_band(self):
        bad = env_pb2.EnvRequest(step=env_pb2.StepRequest(actions=[7.0, 0.0])).SerializeToString()
        (resp,) = self.run_session(Trivial, [bad])
        self.assertEqual(resp.error.reason, "INVALID_ACTION")

    def test_observation_past_float32_goes_through_protobuf(self):
        step = env_pb2.EnvRequest(step=env_pb2.StepRequest(actions=[1.0, 0.0])).SerializeToString()
        (resp,) = self.run_session(_Big, [step])
        self.assertEqual(list(resp.batch.obs[:2]), [math.inf, 0.0])

    def test_malformed_request_ends_the_session(self):
        (ctx,) = self.run_session(Trivial, [b"\x1a\x05\x0a"])
        self.assertEqual(ctx.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("bad request", ctx.details)


if __name__ == "__main__":
    unittest.main()
