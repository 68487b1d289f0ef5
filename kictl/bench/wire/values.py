"""Value helpers the worker and the parent's staging share: bitwise equality, a roll, a probe's swapped pairs.

Part of the protocol, so that the parent's staging (``kictl.bench.judge.staging``) uses exactly the worker's
arithmetic (``kictl.bench.worker.main``) without importing worker code.  torch is imported inside each function.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kictl.bench.wire.lazy import torch_module

__all__ = ["PROBE_PAIRS", "_perturbed", "_rolled", "_same_bits", "input_shift"]


def _same_bits(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` hold the same bytes (shape and dtype too): -0.0 is not 0.0, a NaN equals itself.

    The bytes are compared as 8-byte words where both sides allow it (a byte count and a start that 8 divides),
    else byte by byte: torch compares 8 MiB as bytes in about 7 ms on the CPU and as words in about 1 ms, and
    the parent compares a CPU run's staged inputs after every audited call, the worker its inputs after every
    correctness round."""
    torch = torch_module()

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    left = a.contiguous().reshape(-1).view(torch.uint8)
    right = b.contiguous().reshape(-1).view(torch.uint8)
    if left.numel() % 8 == 0:
        try:
            left, right = left.view(torch.int64), right.view(torch.int64)
        except RuntimeError:  # a start that 8 does not divide: bytes, as they are
            pass
    return bool(torch.equal(left, right))


def input_shift(shift: int, position: int) -> int:
    """The shift of the random input at ``position`` (0, 1, ...) of a call whose shift is ``shift``: ``shift``
    itself for the first (and for every input when it is 0), a hash of both for the others (issue 40).

    Each input is rolled by a shift of its own.  With one shift for all, the inputs of a call stayed aligned with
    each other as the input set had them: a GEMM's row of A, rolled, still met the same columns of B, rolled,
    and a table of the set's prefix sums of row products (N x K per row of A) answered every later call of that
    set in O(M N) lookups (1.7-2.8x, every output correct).  With independent shifts the pairs met depend on the
    difference of two shifts drawn afresh each call, and such a table would need one per difference (K times the
    memory)."""
    if position == 0 or shift == 0:  # shift 0: the set as drawn (correctness rounds, the first warm-up call)
        return shift
    digest = hashlib.sha256(f"kictl-input-shift:{shift}:{position}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


#: an integer type of each width, to move values of any type bit for bit
_RAW = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _rolled(tensor: Any, shift: int, position: int = 0) -> Any:
    """``tensor``'s values moved ``input_shift(shift, position)`` places along its flattened order (a fresh
    tensor); ``position`` is the input's place among the call's inputs.

    The values move bit for bit, through an integer view of their width where there is one: torch's CUDA
    ``roll`` has no kernel for the float8 types (``"roll_cuda" not implemented for 'Float8_e4m3fn'``, H100,
    2026-12-07: every FP8 MoE run failed at staging), and a move of bits needs none."""
    torch = torch_module()

    shift = input_shift(shift, position)
    if tensor.numel() < 2 or shift % tensor.numel() == 0:
        return tensor
    flat = tensor.reshape(-1)
    raw = _RAW.get(tensor.element_size())
    if raw is not None:
        moved = flat.contiguous().view(getattr(torch, raw)).roll(shift % tensor.numel()).view(tensor.dtype)
        return moved.reshape(tensor.shape)
    return flat.roll(shift % tensor.numel()).reshape(tensor.shape)


#: A probe (``loop.step``) swaps this many pairs of neighbouring values in each random input of the previous call's
#: values.
PROBE_PAIRS = 8


def _perturbed(tensor: Any, seed: int) -> Any:
    """``tensor`` with ``PROBE_PAIRS`` pairs of neighbouring values swapped, at positions drawn from ``seed``.

    The values are moved bit for bit (any dtype), so every value and the multiset of values stay what the
    workload's generator made; only a few positions change, each to the place next to it in memory order.  A
    neighbour's swap leaves almost every aggregate of a block of values as it was (a row's or a page's sum, a
    checksum of a tile): a cache keyed on such a fingerprint, or on a sample of the values, matches the probe
    and answers it with the previous call's outputs, which its audit finds wrong.  Swaps of far-apart values
    changed a row's sum about one probe in five (a pair across rows), and such a cache then went uncaught when
    a run had few probes.  ``seed`` 0, or a tensor of fewer than two elements, gives ``tensor`` itself.  The
    positions depend on ``seed`` and the size alone, so kictl's reference worker and the implementation's
    worker perturb the same inputs identically.
    """
    torch = torch_module()

    count = tensor.numel()
    raw = _RAW.get(tensor.element_size())
    if not seed or count < 2 or raw is None:
        return tensor
    drawn = torch.randint(0, count - 1, (8 * PROBE_PAIRS,), generator=torch.Generator().manual_seed(seed)).tolist()
    taken: set[int] = set()
    starts: list[int] = []
    for position in drawn:
        if position in taken or position + 1 in taken:
            continue
        taken.update((position, position + 1))
        starts.append(position)
        if len(starts) == PROBE_PAIRS:
            break
    if not starts:
        return tensor
    flat = tensor.contiguous().reshape(-1).view(getattr(torch, raw)).clone()
    first = torch.tensor(starts, device=tensor.device)
    second = first + 1
    values = flat[first].clone()
    flat[first] = flat[second]
    flat[second] = values
    return flat.view(tensor.dtype).reshape(tensor.shape)
