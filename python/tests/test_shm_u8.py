"""herd_env.shm's segment layout (herd/internal/shmwire's TestLayout has
the same table) and a uint8 session's batch written into a segment."""

import mmap
import os
import unittest

from herd_env import shm
from herd_env._proto.herd.v1 import env_pb2
from shmtest import segment


class LayoutTest(unittest.TestCase):
    def test_offsets(self):
        # (act, obs, final, rew, lives, term, trunc, size), as shmwire.NewLayout(3, 5, 2, u8).
        self.assertEqual(shm.layout(3, 5, 2), (64, 88, 152, 216, 240, 256, 264, 4096))
        self.assertEqual(shm.layout(3, 5, 2, True), (64, 88, 104, 120, 144, 160, 168, 4096))

    def test_refuses_other_headers(self):
        self._refused(lambda m: shm.write_header(m, 2, 3, 1, False), 2, 3, 1, True, "does not match")

    def test_old_version(self):
        def old(m):
            shm.write_header(m, 2, 3, 1)
            m[:8] = b"HERDSHM1"
        self._refused(old, 2, 3, 1, False, "HERDSHM1.*same herd version")

    def _refused(self, header, n, od, ad, u8, why):
        """A segment whose header writes header refuses a session of these dims."""
        size = shm.layout(n, od, ad, u8)[-1]
        fd = os.memfd_create("herd-test")
        try:
            os.ftruncate(fd, size)
            with mmap.mmap(fd, size) as m:
                header(m)
            with self.assertRaisesRegex(ValueError, why):
                shm._Segment(fd, n, od, ad, u8)
        finally:
            os.close(fd)


class WriteBatchTest(unittest.TestCase):
    def test_u8_batch(self):
        seg = segment(3, 4, 1, u8=True)
        try:
            b = env_pb2.Batch(obs_u8=bytes(range(12)), final_obs_u8=bytes([200, 201, 202, 203]),
                              rewards=[1, 2, 3], terminated=[False, True, False], truncated=[False, False, False],
                              lives=[5, 0, 4])
            seg.write_batch(b)
            self.assertEqual(bytes(seg.obs), bytes(range(12)))
            self.assertEqual(bytes(seg.final[4:8]), bytes([200, 201, 202, 203]))
            self.assertEqual(list(seg.rew), [1, 2, 3])
            self.assertEqual(list(seg.lives), [5, 0, 4])
            self.assertEqual(list(seg.term), [0, 1, 0])
            seg.write_batch(env_pb2.Batch(obs_u8=bytes(12), rewards=[0, 0, 0], terminated=[False] * 3, truncated=[True, False, False]))
            self.assertEqual(list(seg.lives), [shm.NO_LIVES] * 3)
            self.assertEqual(list(seg.trunc), [1, 0, 0])
        finally:
            seg.close()


if __name__ == "__main__":
    unittest.main()
