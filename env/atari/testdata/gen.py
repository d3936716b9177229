"""Writes cv2.json: OpenCV's INTER_AREA resizes and RGB2GRAY conversions of
pseudo-random uint8 images, the reference env/atari's tests compare with.
Image n of a case holds pixel(i) = ((i + 1) * 2654435761 >> 13) mod 256
at flat index i, which the Go test computes too; outputs are hex strings.

Run with Debian's python3 and python3-opencv (4.6.0):
    /usr/bin/python3 env/atari/testdata/gen.py
"""
import json
import os

import cv2
import numpy as np



def pixels(shape):
    i = np.arange(int(np.prod(shape)), dtype=np.uint64) + np.uint64(1)
    return ((i * np.uint64(2654435761)) >> np.uint64(13)).astype(np.uint8).reshape(shape)


cases = []
# (h, w, c, oh, ow): Atari frames to 84×84 (RGB and gray), integer ratios
# (the fast path: 2×2, 3×3, 2×3), and small odd ratios.
for h, w, c, oh, ow in [
    (210, 160, 3, 84, 84),
    (210, 160, 1, 84, 84),
    (8, 8, 1, 4, 4),
    (8, 8, 3, 4, 4),
    (8, 8, 2, 4, 4),
    (9, 9, 1, 3, 3),
    (6, 9, 1, 3, 3),
    (5, 7, 1, 2, 3),
    (7, 5, 3, 3, 2),
    (10, 10, 4, 4, 7),
]:
    img = pixels((h, w, c))
    out = cv2.resize(img, (ow, oh), interpolation=cv2.INTER_AREA).reshape(oh, ow, c)
    cases.append({"h": h, "w": w, "c": c, "oh": oh, "ow": ow,
                  "dst": out.tobytes().hex()})

rgb = pixels((64, 64, 3))
extremes = np.array([[[0, 0, 0], [255, 255, 255], [255, 0, 0], [0, 255, 0], [0, 0, 255], [1, 1, 1]]], dtype=np.uint8)
gray = []
for im in (rgb, extremes):
    gray.append({"src": im.tobytes().hex(), "dst": cv2.cvtColor(im, cv2.COLOR_RGB2GRAY).tobytes().hex()})

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cv2.json")
with open(path, "w") as f:
    json.dump({"opencv": cv2.__version__, "resize": cases, "gray": gray}, f, separators=(",", ":"))
