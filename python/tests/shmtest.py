"""Shared-memory segments for herd_env's Python tests and measurements:
a segment as herd's Go client makes one, and the plain per-array write the
fast paths are checked against."""

import array
import mmap
import os

from herd_env import shm


def segment(n, od, ad, name="herd-test", u8=False):
    """A memfd segment for n envs (obs dim od, action dim ad) with the
    header herd's client writes, mapped as a shm._Segment."""
    size = shm.layout(n, od, ad, u8)[-1]
    fd = os.memfd_create(name)
    os.ftruncate(fd, size)
    with mmap.mmap(fd, size) as m:
        shm.write_header(m, n, od, ad, u8)
    seg = shm._Segment(fd, n, od, ad, u8)
    os.close(fd)
    return seg


def plain_write(seg, obs, rewards, terms, truncs, final):
    """seg.write with array.array's conversions, one array at a time."""
    seg.obs[:] = array.array("f", obs)
    seg.rew[:] = array.array("d", rewards)
    seg.lives[:] = array.array("i", [shm.NO_LIVES] * len(rewards))
    seg.term[:] = array.array("B", terms)
    seg.trunc[:] = array.array("B", truncs)
    if final:
        od, k = seg.od, 0
        for i, (t, u) in enumerate(zip(terms, truncs)):
            if t or u:
                seg.final[i * od:(i + 1) * od] = array.array("f", final[k * od:(k + 1) * od])
                k += 1
