"""PyTorch's side of BenchmarkConv2d: forward + backward at batch 32 of the
minatar and nature convolution stacks (no optimizer step, no ReLU), one
thread unless THREADS says otherwise.

    /usr/bin/python3 nn/testdata/gen/conv_bench_torch.py
"""
import os
import time

import torch

torch.set_num_threads(int(os.environ.get("THREADS", "1")))
STACKS = {
    "minatar": ((4, 10, 10), [(16, 3, 1)]),
    "nature": ((4, 84, 84), [(32, 8, 4), (64, 4, 2), (64, 3, 1)]),
}
B = 32
for name, ((c, h, w), layers) in STACKS.items():
    convs, cin = [], c
    for o, k, s in layers:
        convs.append(torch.nn.Conv2d(cin, o, k, stride=s))
        cin = o
    x = torch.rand(B, c, h, w)
    with torch.no_grad():
        y = x
        for m in convs:
            y = m(y)
    g = torch.rand_like(y)

    def step():
        y = x
        for m in convs:
            y = m(y)
        y.backward(g)

    for _ in range(5):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 3:
        step()
        n += 1
    dt = (time.perf_counter() - t0) / n
    print(f"{name}\t{dt * 1e6:.0f} µs per forward+backward (torch {torch.__version__}, {torch.get_num_threads()} thread)")
