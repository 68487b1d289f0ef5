"""Fair: writes a few MiB of scratch files to ``/tmp`` and ``/dev/shm`` at import and in ``setup()``, a few
lines to its log, and removes the files (must pass: well inside every limit)."""

import os
import sys

import torch

for folder in ("/tmp", "/dev/shm"):
    path = os.path.join(folder, "scratch.bin")
    with open(path, "wb") as handle:
        handle.write(b"\0" * (4 << 20))
    os.remove(path)
print("scratch files written and removed", file=sys.stderr)


def setup(hidden_states, weight):
    with open("/tmp/setup.bin", "wb") as handle:
        handle.write(b"\1" * (2 << 20))


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
