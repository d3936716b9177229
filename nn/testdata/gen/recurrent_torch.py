"""Writes nn/testdata/recurrent_torch.json.gz: PyTorch's one-layer LSTM and
GRU stepped over a sequence with episode resets, for nn's
TestLSTMMatchesPyTorch and TestGRUMatchesPyTorch.

    /usr/bin/python3 nn/testdata/gen/recurrent_torch.py nn/testdata/recurrent_torch.json.gz

The module runs one step at a time, and the state entering step t is
multiplied by (1 − start[t]) first, as CleanRL's ppo_atari_lstm does.
Parameters (in named_parameters order), then x, h0 (and c0), then the
output gradient g are filled from the LCG of conv_torch.py; the loss is
sum(h_t · g_t) over all steps. Written as base64 little-endian float32.
"""
import gzip
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conv_torch import LCG, b64  # noqa: E402

T, B, IN, H = 5, 3, 4, 6
# starts[t][b]: sequence b begins an episode at step t.
STARTS = [[0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 1, 1]]


def run(kind):
    rng = LCG()
    m = torch.nn.LSTM(IN, H) if kind == "lstm" else torch.nn.GRU(IN, H)
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.copy_(rng.fill(tuple(p.shape), 0.5))
    x = rng.fill((T, B, IN), 1.0).requires_grad_(True)
    h0 = rng.fill((B, H), 0.5).requires_grad_(True)
    c0 = rng.fill((B, H), 0.5).requires_grad_(True) if kind == "lstm" else None
    keep = 1 - torch.tensor(STARTS, dtype=torch.float32)
    h, c, hs = h0, c0, []
    for t in range(T):
        k = keep[t].unsqueeze(1)
        if kind == "lstm":
            y, (h, c) = m(x[t:t + 1], ((h * k).unsqueeze(0), (c * k).unsqueeze(0)))
            h, c = h[0], c[0]
        else:
            y, h = m(x[t:t + 1], (h * k).unsqueeze(0))
            h = h[0]
        hs.append(y[0])
    hs = torch.stack(hs)
    g = rng.fill(tuple(hs.shape), 1.0)
    (hs * g).sum().backward()
    out = {"kind": kind, "T": T, "B": B, "in": IN, "hidden": H, "starts": STARTS,
           "params": [{"name": n, "shape": list(p.shape), "grad": b64(p.grad)} for n, p in m.named_parameters()],
           "hs": b64(hs), "dx": b64(x.grad), "dh0": b64(h0.grad)}
    if kind == "lstm":
        out["c_final"] = b64(c)
        out["dc0"] = b64(c0.grad)
    return out


def main(path):
    with gzip.open(path, "wt") as fh:
        json.dump({"torch": torch.__version__, "cases": [run("lstm"), run("gru")]}, fh)


if __name__ == "__main__":
    main(sys.argv[1])
