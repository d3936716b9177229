"""Writes nn/testdata/rmsprop_torch.json: torch.optim.RMSprop's parameters
after each of a few steps, plain and centered, for nn's
TestRMSPropMatchesPyTorch.

    /usr/bin/python3 nn/testdata/gen/rmsprop_torch.py nn/testdata/rmsprop_torch.json

The initial parameters and the gradient of every step are drawn with
torch.randn (manual seed 0), float32, and stored in the table with torch's
parameters after each step.
"""
import json
import sys

import torch

CASES = [
    # name, lr, alpha, eps, centered (MinAtar's examples/dqn.py is "minatar")
    ("minatar", 2.5e-4, 0.95, 0.01, True),
    ("plain", 1e-2, 0.9, 1e-8, False),
    ("centered_small_eps", 1e-3, 0.99, 1e-6, True),
]
N, STEPS = 8, 5


def main(path):
    torch.manual_seed(0)
    out = []
    for name, lr, alpha, eps, centered in CASES:
        w0 = torch.randn(N)
        grads = [torch.randn(N) * ((i + 1) * 0.1) for i in range(STEPS)]
        p = torch.nn.Parameter(w0.clone())
        opt = torch.optim.RMSprop([p], lr=lr, alpha=alpha, eps=eps, centered=centered)
        after = []
        for g in grads:
            p.grad = g.clone()
            opt.step()
            after.append([float(x) for x in p.detach().tolist()])
        out.append({"name": name, "lr": lr, "alpha": alpha, "eps": eps, "centered": centered,
                    "w0": [float(x) for x in w0.tolist()], "grads": [[float(x) for x in g.tolist()] for g in grads],
                    "after": after})
    with open(path, "w") as f:
        json.dump({"torch": torch.__version__, "cases": out}, f)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
