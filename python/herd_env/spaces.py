"""Gymnasium spaces <-> herd.v1 Space messages, and the flat float encoding
herd uses for actions and observations. Duck-typed: works with Gymnasium's
spaces (NumPy arrays) and with plain objects that have the same attributes
(n/start, low/high/shape, nvec) holding lists."""

import math

from ._proto.herd.v1 import env_pb2

try:  # NumPy is optional: used to hand Box/MultiDiscrete actions to envs.
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the machine
    _np = None


def flatten(x):
    """Flattens a scalar, a (nested) sequence or an array to a list of floats."""
    if hasattr(x, "ravel"):
        return [float(v) for v in x.ravel().tolist()]
    if isinstance(x, (list, tuple)):
        out = []
        for v in x:
            out.extend(flatten(v))
        return out
    return [float(x)]


def _kind(space):
    name = type(space).__name__
    if name in ("Discrete", "Box", "MultiDiscrete"):
        return name
    if hasattr(space, "nvec"):
        return "MultiDiscrete"
    if hasattr(space, "low") and hasattr(space, "high"):
        return "Box"
    if hasattr(space, "n"):
        return "Discrete"
    raise ValueError("unsupported space %r: herd speaks Discrete, Box and MultiDiscrete" % (space,))


class Codec:
    """Describes one space on the wire and converts its elements."""

    def __init__(self, space):
        self.space = space
        self.kind = _kind(space)
        self.box_rows = None
        # A uint8 Box (Gymnasium's images) may travel one byte a value
        # (Batch.obs_u8).
        self.u8 = self.kind == "Box" and str(getattr(space, "dtype", "")) == "uint8"
        if self.kind == "Discrete":
            self.n = int(space.n)
            self.start = int(getattr(space, "start", 0))
            self.dim = 1
            self.shape = ()
        elif self.kind == "Box":
            self.low = flatten(space.low)
            self.high = flatten(space.high)
            self.shape = tuple(int(d) for d in getattr(space, "shape", (len(self.low),)))
            n = 1
            for d in self.shape:
                n *= d
            if len(self.low) == 1 and n != 1:  # scalar bounds broadcast over the shape
                self.low, self.high = self.low * n, self.high * n
            self.dim = len(self.low)
            # rows' one-array path: the shape each env's action takes, when
            # the array's rows are what to_env makes (not for shape (), whose
            # rows would be NumPy scalars rather than 0-d arrays).
            self.box_rows = self.shape if self.shape and n == self.dim else None
        else:
            self.nvec = [int(v) for v in flatten(space.nvec)]
            self.dim = len(self.nvec)
            self.shape = (self.dim,)
        self.flat_shape = (self.dim,)

    def to_proto(self):
        if self.kind == "Discrete":
            return env_pb2.Space(discrete=env_pb2.Discrete(n=self.n, start=self.start))
        if self.kind == "Box":
            return env_pb2.Space(box=env_pb2.Box(low=self.low, high=self.high, shape=list(self.shape)))
        return env_pb2.Space(multi_discrete=env_pb2.MultiDiscrete(nvec=self.nvec))

    def check(self, a):
        """Returns None if the flat action a belongs to the space, else why not
        (herd's rules: Box checks length and finiteness, not bounds, as
        Gymnasium's continuous envs clip themselves)."""
        if len(a) != self.dim:
            return "%s wants %d values, got %d" % (self.kind, self.dim, len(a))
        if self.kind == "Discrete":
            v = a[0]
            if math.isnan(v) or math.isinf(v) or v != math.floor(v) or not (self.start <= v < self.start + self.n):
                return "%r not in Discrete(%d, start=%d)" % (v, self.n, self.start)
        elif self.kind == "Box":
            for i, v in enumerate(a):
                if math.isnan(v) or math.isinf(v):
                    return "action[%d] = %r is not finite" % (i, v)
        else:
            for i, v in enumerate(a):
                if math.isnan(v) or math.isinf(v) or v != math.floor(v) or not (0 <= v < self.nvec[i]):
                    return "action[%d] = %r not in [0, %d)" % (i, v, self.nvec[i])
        return None

    def rows(self, actions, n):
        """Splits n envs' flat actions into the values the envs expect, or
        returns (env index, why) for the first action outside the space."""
        if self.kind == "Discrete":  # one value per env: no slicing
            lo, hi = self.start, self.start + self.n
            if n == 1 and len(actions) == 1:  # one env: no list to build and scan
                v = actions[0]
                try:
                    k = int(v)
                    if k == v and lo <= k < hi:
                        return [k]
                except (ValueError, OverflowError):  # NaN, ±inf
                    pass
            try:  # every action valid: one pass in C
                out = list(map(int, actions))
                if out == actions and (not out or (min(out) >= lo and max(out) < hi)):
                    return out
            except (ValueError, OverflowError):  # NaN, ±inf
                pass
            out = []  # find the first bad one, for the message
            for i, v in enumerate(actions):
                k = int(v) if v == v and v not in (math.inf, -math.inf) else None
                if k is None or k != v or not lo <= k < hi:
                    return i, "%r not in Discrete(%d, start=%d)" % (v, self.n, self.start)
                out.append(k)
            return out
        if self.box_rows is not None and _np is not None and len(actions) == n * self.dim:
            # Every value finite (the usual case, told by their sum: a NaN or
            # an infinity makes it NaN or infinite; a finite sum that
            # overflows only sends us to the loop below): one array for the
            # message, each env handed its row, as to_env would make it.
            total = sum(actions)
            if total - total == 0:
                return list(_np.array(actions, dtype=_np.float32).reshape((n,) + self.box_rows))
        d, out = self.dim, []
        for i in range(n):
            a = actions[i * d:(i + 1) * d]
            why = self.check(a)
            if why is not None:
                return i, why
            out.append(self.to_env(a))
        return out

    def to_env(self, a):
        """The flat action a as the env expects it."""
        if self.kind == "Discrete":
            return int(a[0])
        if self.kind == "MultiDiscrete":
            ints = [int(v) for v in a]
            return _np.asarray(ints, dtype=_np.int64) if _np is not None else ints
        if _np is not None:
            return _np.asarray(a, dtype=_np.float32).reshape(self.shape)
        return list(a)
