"""Run by herd's Go tests against `herd serve replay`: pushes records from
Python, reads them back, samples with a uniform and a prioritized sampler,
updates priorities, and checks what it can; prints one JSON line with what
it saw so the Go side can check it too. Exits non-zero on any mismatch.

    python3 replay_client_check.py HOST:PORT
"""

import json
import sys

from herd_env.replay import ReplayClient


def main(target):
    c = ReplayClient(target, timeout=20)
    d = c.describe()
    names = [s.name for s in d.samplers]
    assert names == ["per", "uniform"], names
    recs = [("py-%03d" % i, bytes([i % 256]) * (100 + i), {"priority": float(i + 1)}) for i in range(64)]
    assert c.push(recs[:32]) == 32
    assert c.push(recs[32:]) == 32
    got = c.get(["py-007", "py-063"], with_fields=True)
    assert got[0] == ("py-007", recs[7][1], {"priority": 8.0}), got[0][0]
    assert got[1][2] == {"priority": 64.0}
    values = {k: v for k, v, _ in recs}
    for sampler in ("uniform", "per"):
        s = c.sample(256, sampler=sampler)
        assert len(s) == 256, len(s)
        for k, v in s:
            assert values[k] == v, k
    # Make one key dominate the prioritized sampler.
    keys = [k for k, _, _ in recs]
    c.update_priorities("priority", keys, [1e-9] * 63 + [1e9])
    s = c.sample(200, sampler="per")
    hot = sum(1 for k, _ in s if k == "py-063")
    assert hot >= 195, hot
    assert c.get(["py-063"], with_fields=True)[0][2]["priority"] == 1e9
    # Bad input is INVALID_ARGUMENT, and the client goes on.
    import grpc
    try:
        c.push([("", b"x", {"priority": 1.0})])
        raise AssertionError("empty key accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()
    try:
        c.push([("py-x", b"x", None)])  # no priority field for "per"
        raise AssertionError("record without priority accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()
    print(json.dumps({"pushed": len(recs), "hot": hot, "len": c.describe().len}), flush=True)
    c.close()


if __name__ == "__main__":
    main(sys.argv[1])
