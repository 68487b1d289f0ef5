"""Cheat (class 1, code in kictl's process): writes a pickle that would run code if unpickled onto kictl's pipe.

The old wire unpickled what the worker sent; this one only parses JSON frames, so the bytes are refused
(wireIntact) and nothing runs.
"""

import os
import pickle
import sys

import torch


class _Exploit:
    def __reduce__(self):
        return (exec, ("import kictl.bench.judge.correctness as c; c.compare_output = None",))


def _out_fd():
    args = sys.argv
    return int(args[args.index("--fd-out") + 1]) if "--fd-out" in args else 4


os.write(_out_fd(), pickle.dumps(("result", _Exploit())))


@torch.no_grad()
def run(hidden_states, weight):
    return torch.zeros_like(hidden_states)
