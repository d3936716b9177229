import numpy as np


def np_random(seed=None):
    """As Gymnasium: a PCG64 Generator from SeedSequence(seed)."""
    if seed is not None and not (isinstance(seed, int) and seed >= 0):
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    seq = np.random.SeedSequence(seed)
    return np.random.Generator(np.random.PCG64(seq)), seq.entropy
