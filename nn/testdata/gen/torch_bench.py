"""PyTorch's side of BenchmarkConv2d and BenchmarkLSTM: forward + backward
of the minatar and nature convolution stacks at batch 32 (no optimizer
step, no ReLU), and of nn.LSTM(64, 128) over T = 128 steps of B = 8
sequences (one call over the whole sequence, no resets); one thread unless
THREADS says otherwise; CASES (default conv,lstm; gru adds nn.GRU) picks the cases.

    /usr/bin/python3 nn/testdata/gen/torch_bench.py
"""
import os
import time

import torch

torch.set_num_threads(int(os.environ.get("THREADS", "1")))


def timed(name, step):
    for _ in range(5):
        step()
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < 3:
        step()
        n += 1
    dt = (time.perf_counter() - t0) / n
    dc = (time.process_time() - c0) / n  # all threads' CPU time: on shared cores the wall time measures the other jobs
    print(f"{name}\t{dt * 1e6:.0f} µs per forward+backward, {dc * 1e6:.0f} CPU-µs (torch {torch.__version__}, {torch.get_num_threads()} thread)")


def conv_step(shape, layers, batch=32):
    c, h, w = shape
    convs, cin = [], c
    for o, k, s in layers:
        convs.append(torch.nn.Conv2d(cin, o, k, stride=s))
        cin = o
    x = torch.rand(batch, c, h, w)
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
    return step


def lstm_step(t=128, b=8, n_in=64, h=128, kind=torch.nn.LSTM):
    m = kind(n_in, h)
    x, g = torch.rand(t, b, n_in), torch.rand(t, b, h)

    def step():
        y, _ = m(x)
        y.backward(g)
    return step


cases = os.environ.get("CASES", "conv,lstm").split(",")
if "conv" in cases:
    timed("conv minatar", conv_step((4, 10, 10), [(16, 3, 1)]))
    timed("conv nature", conv_step((4, 84, 84), [(32, 8, 4), (64, 4, 2), (64, 3, 1)]))
if "lstm" in cases:
    timed("lstm T=128 B=8 in=64 H=128", lstm_step())
if "gru" in cases:
    timed("gru T=128 B=8 in=64 H=128", lstm_step(kind=torch.nn.GRU))
