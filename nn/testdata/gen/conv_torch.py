"""Writes nn/testdata/conv_torch.json.gz: PyTorch's Conv2d forward and
gradients on fixed random inputs, for nn's TestConv2dMatchesPyTorch.

Run with Debian's PyTorch (apt-get install python3-torch):

    /usr/bin/python3 nn/testdata/gen/conv_torch.py nn/testdata/conv_torch.json.gz

Each case is a stack of Conv2d layers with ReLU between them (none after
the last), at batch 2. The input x, every weight and bias and the output
gradient g are not stored: both sides fill them, in that order, from one
32-bit LCG (LCG below, exact in float32) started afresh for each case, so the table holds only what
PyTorch computed: the output y and, for the loss L = sum(y * g), the
gradients of x and of every weight and bias, as base64 little-endian
float32.
"""
import base64
import gzip
import json
import sys

import numpy as np
import torch

CASES = [
    # name, (C, H, W), [(out, kernel, stride, padding), ...]
    ("minatar", (4, 10, 10), [(16, 3, 1, 0)]),
    ("nature", (4, 36, 36), [(32, 8, 4, 0), (64, 4, 2, 0), (64, 3, 1, 0)]),
    ("padded", (3, 7, 9), [(5, 3, 2, 1), (2, 2, 1, 1)]),
]
BATCH = 2

# Whole networks (ConvNet): name, (C, H, W), convs, hidden, out. Every
# parameter, in module order, and then x are filled with scale 0.1.
NETS = [
    ("minatar_conv_mlp32", (4, 10, 10), [(16, 3, 1, 0)], [32], 6),
]


class LCG:
    """x ← 1664525·x + 1013904223 mod 2³²; a value is (x >> 8)/2²³ − 1, in
    [−1, 1), times a scale: exact in float32."""

    def __init__(self):
        self.x = 12345

    def fill(self, shape, scale):
        n = int(np.prod(shape))
        out = np.empty(n, dtype=np.float32)
        for i in range(n):
            self.x = (1664525 * self.x + 1013904223) % (1 << 32)
            out[i] = np.float32(((self.x >> 8) / float(1 << 23) - 1.0) * scale)
        return torch.tensor(out.reshape(shape))


def b64(t):
    return base64.b64encode(t.detach().numpy().astype("<f4").tobytes()).decode()


def run_net(rng, mods, fin, hidden, nout, chw):
    """Appends the MLP head (Linear, ReLU per hidden width, then Linear to
    nout) to the encoder modules mods, whose flattened output has fin
    values, fills every parameter and then x (batch of chw images) from
    rng, and returns what PyTorch computed for L = sum(y * g)."""
    for hid in hidden:
        mods += [torch.nn.Linear(fin, hid), torch.nn.ReLU()]
        fin = hid
    mods.append(torch.nn.Linear(fin, nout))
    net = torch.nn.Sequential(*mods)
    with torch.no_grad():
        for _, prm in net.named_parameters():
            prm.copy_(rng.fill(tuple(prm.shape), 0.1))
    x = rng.fill((BATCH,) + tuple(chw), 1.0).requires_grad_(True)
    y = net(x)
    g = rng.fill(tuple(y.shape), 1.0)
    (y * g).sum().backward()
    return {
        "in": list(chw), "batch": BATCH,
        "params": [{"name": n, "shape": list(prm.shape), "grad": b64(prm.grad)} for n, prm in net.named_parameters()],
        "y": b64(y), "dx": b64(x.grad),
    }


def main(path):
    torch.manual_seed(0)
    out = {"torch": torch.__version__, "cases": []}
    for name, (c, h, w), layers in CASES:
        rng = LCG()  # every case starts from the same state
        x = rng.fill((BATCH, c, h, w), 1.0).requires_grad_(True)
        convs = []
        cin = c
        for (o, k, s, p) in layers:
            m = torch.nn.Conv2d(cin, o, k, stride=s, padding=p)
            with torch.no_grad():
                m.weight.copy_(rng.fill(tuple(m.weight.shape), 0.5))
                m.bias.copy_(rng.fill(tuple(m.bias.shape), 0.5))
            convs.append(m)
            cin = o
        y = x
        for i, m in enumerate(convs):
            y = m(y)
            if i + 1 < len(convs):
                y = torch.relu(y)
        g = rng.fill(tuple(y.shape), 1.0)
        (y * g).sum().backward()
        out["cases"].append({
            "name": name,
            "in": [c, h, w],
            "batch": BATCH,
            "layers": [{"out": o, "kernel": k, "stride": s, "padding": p,
                        "dweight": b64(m.weight.grad), "dbias": b64(m.bias.grad)}
                       for (o, k, s, p), m in zip(layers, convs)],
            "y": b64(y), "dx": b64(x.grad),
        })
    out["nets"] = []
    for name, (c, h, w), convs, hidden, nout in NETS:
        rng = LCG()
        mods, cin, hh, ww = [], c, h, w
        for (o, k, st, p) in convs:
            mods += [torch.nn.Conv2d(cin, o, k, stride=st, padding=p), torch.nn.ReLU()]
            cin, hh, ww = o, (hh + 2 * p - k) // st + 1, (ww + 2 * p - k) // st + 1
        mods.append(torch.nn.Flatten())
        rec = run_net(rng, mods, cin * hh * ww, hidden, nout, (c, h, w))
        rec.update(name=name, hidden=hidden, out=nout,
                   convs=[{"out": o, "kernel": k, "stride": st, "padding": p} for (o, k, st, p) in convs])
        out["nets"].append(rec)
    with gzip.open(path, "wt") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main(sys.argv[1])
