"""Cheat (class: inputs predicted from the structure of the timed sets; made useless: not faster than honest).

A GEMM (M = 1) that learns each input set the first time it sees it (computing honestly then) and keeps, per
set, the prefix sums of the products of A with each row of B.  When a later call's A is a roll of a known A, and
B's first values say which row of the known B its first row starts in, every output is two table lookups: with
one shift for every input of a call, the rolled A still met the same columns of the rolled B, and this answered
correctly (A checked in full, so a probe's swapped values send it back to honest work) at a fraction of a GEMM.
Each input now gets a shift of its own (``kictl.bench.wire.values.input_shift``): B's rows no longer line up with the
table's, the check of B fails, and every call is computed honestly.
"""

import numpy as np
import torch

_SETS = []
_MAX_SETS = 8


def _roll_of(x, known):
    """``c`` with ``x == roll(known, c)`` (``torch.roll``'s direction), or ``None``."""
    for p in np.flatnonzero(known == x[0])[:32]:
        c = int(-p) % known.size
        if np.array_equal(np.roll(known, c), x):
            return c
    return None


def _from_table(entry, a, b):
    known_a, known_b, table, first_cols = entry
    c = _roll_of(a, known_a)
    if c is None:
        return None
    n, k = known_b.shape
    if c + 1 >= k:
        return None
    row = first_cols.get((float(b[0, c]), float(b[0, c + 1])))
    if row is None:
        return None
    q = (-row) % n
    # B's first row, as the table expects it, against what came (a sample: all of B would cost a GEMM's reading)
    expected = np.concatenate([known_b[(-q - 1) % n, k - c :], known_b[(-q) % n, : k - c]])
    if not np.array_equal(expected[:256].astype(np.float16), b[0, :256]):
        return None
    rows = (np.arange(n) - q) % n
    before = (rows - 1) % n
    return table[rows, k - c] + table[before, k] - table[before, k - c]


@torch.no_grad()
def run(A, B):
    a = A.float().numpy().reshape(-1)
    b = B.numpy()
    for entry in _SETS:
        found = _from_table(entry, a, b)
        if found is not None:
            return torch.from_numpy(found.astype(np.float32)).to(torch.float16).reshape(1, -1)
    b32 = b.astype(np.float32)
    out = b32 @ a
    if len(_SETS) < _MAX_SETS and A.shape[0] == 1:
        table = np.zeros((b32.shape[0], b32.shape[1] + 1), dtype=np.float32)
        np.cumsum(b32 * a, axis=1, out=table[:, 1:])
        first_cols = {(float(b32[r, 0]), float(b32[r, 1])): r for r in range(b32.shape[0])}
        _SETS.append((a.copy(), b32, table, first_cols))
    return torch.from_numpy(out).to(torch.float16).reshape(1, -1)
