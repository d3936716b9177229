"""Writes nn/testdata/residual_torch.json.gz: PyTorch's forward pass and
gradients of IMPALA-style residual encoders (Espeholt et al. 2018, the
"large" network, as CleanRL's ppo_procgen.py writes it) followed by an MLP
head, for nn's TestResidualNetMatchesPyTorch.

Run with Debian's PyTorch (apt-get install python3-torch):

    /usr/bin/python3 nn/testdata/gen/residual_torch.py nn/testdata/residual_torch.json.gz

Every parameter (in module order), then x and the output gradient g are
filled from conv_torch.py's LCG started afresh for each net, so the table
holds only what PyTorch computed: the output y and, for the loss
L = sum(y * g), the gradients of x and of every parameter, as base64
little-endian float32.
"""
import gzip
import json
import sys

import torch

from conv_torch import BATCH, LCG, run_net

# name, (C, H, W), stage channels, hidden, out
NETS = [
    ("impala_minatar", (4, 10, 10), [16, 32, 32], [256], 6),
    ("odd_sizes", (3, 7, 9), [4, 6], [8], 3),
]


class ResidualBlock(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv0 = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        inputs = x
        x = self.conv0(torch.relu(x))
        x = self.conv1(torch.relu(x))
        return x + inputs


class ConvSequence(torch.nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, 3, padding=1)
        self.res_block0 = ResidualBlock(cout)
        self.res_block1 = ResidualBlock(cout)

    def forward(self, x):
        x = self.conv(x)
        x = torch.nn.functional.max_pool2d(x, kernel_size=3, stride=2, padding=1)
        return self.res_block1(self.res_block0(x))


def main(path):
    out = {"torch": torch.__version__, "nets": []}
    for name, (c, h, w), stages, hidden, nout in NETS:
        rng = LCG()
        mods, cin, hh, ww = [], c, h, w
        for ch in stages:
            mods.append(ConvSequence(cin, ch))
            cin, hh, ww = ch, (hh - 1) // 2 + 1, (ww - 1) // 2 + 1
        mods += [torch.nn.Flatten(), torch.nn.ReLU()]
        rec = run_net(rng, mods, cin * hh * ww, hidden, nout, (c, h, w))
        rec.update(name=name, stages=stages, hidden=hidden, out=nout)
        out["nets"].append(rec)
    with gzip.open(path, "wt") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main(sys.argv[1])
