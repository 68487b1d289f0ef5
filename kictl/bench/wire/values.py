"""Value helpers the worker and the parent's staging share: bitwise equality, a roll, a probe's swapped pairs.

Part of the protocol, so that the parent's staging (``kictl.bench.judge.staging``) uses exactly the worker's
arithmetic (``kictl.bench.worker.main``) without importing worker code.  torch is imported inside each function.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROBE_PAIRS", "_perturbed", "_rolled", "_same_bits"]


def _same_bits(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)))


def _rolled(tensor: Any, shift: int) -> Any:
    """``tensor``'s values moved ``shift`` places along its flattened order (a fresh tensor)."""
    if tensor.numel() < 2 or shift % tensor.numel() == 0:
        return tensor
    return tensor.reshape(-1).roll(shift % tensor.numel()).reshape(tensor.shape)


#: A probe (``loop.step``) swaps this many pairs of neighbouring values in each random input of the previous call's
#: values.
PROBE_PAIRS = 8
_RAW = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


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
    import torch

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
