"""Cheat (class 1): forges a well-framed message with a member of its own, and a 2 GiB header, on kictl's pipe.

Both break the wire's strict schema or its size cap (wireIntact).
"""

import json
import os
import struct
import sys

import torch


def _out_fd():
    args = sys.argv
    return int(args[args.index("--fd-out") + 1]) if "--fd-out" in args else 4


@torch.no_grad()
def run(hidden_states, weight):
    header = json.dumps(
        {"type": "outputs", "body": {"tensors": [], "error": None, "notes": [], "exec": "print(1)"}, "buffers": []}
    ).encode()
    os.write(_out_fd(), b"KIW1" + struct.pack(">I", len(header)) + header)
    os.write(_out_fd(), b"KIW1" + struct.pack(">I", 2**31))
    return torch.zeros_like(hidden_states)
