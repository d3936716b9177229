"""PyTorch's side of BenchmarkLSTM: nn.LSTM(64, 128) forward + backward
over T = 128 steps of B = 8 sequences (one cuDNN-free CPU call over the
whole sequence, no resets), one thread unless THREADS says otherwise.

    /usr/bin/python3 nn/testdata/gen/lstm_bench_torch.py
"""
import os
import time

import torch

torch.set_num_threads(int(os.environ.get("THREADS", "1")))
T, B, IN, H = 128, 8, 64, 128
m = torch.nn.LSTM(IN, H)
x = torch.rand(T, B, IN)
g = torch.rand(T, B, H)


def step():
    y, _ = m(x)
    y.backward(g)


for _ in range(5):
    step()
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < 3:
    step()
    n += 1
print(f"lstm T={T} B={B} in={IN} H={H}\t{(time.perf_counter() - t0) / n * 1e6:.0f} µs per forward+backward (torch {torch.__version__}, {torch.get_num_threads()} thread)")
