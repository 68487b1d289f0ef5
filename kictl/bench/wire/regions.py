"""The layout of a worker's inputs region (CPU): where each timed input lies, the same on both sides.

kictl's parent writes each timed call's values into the region (``kictl.bench.judge.staging``); the worker sees
the same bytes as its timed tensors.  ``layout`` gives both sides the offsets, ``view`` a tensor over them.
"""

from __future__ import annotations

import math
from typing import Any

from kictl.bench import wire
from kictl.bench.wire.lazy import torch_module

ALIGN = 64


def layout(plan: wire.Plan, size: int) -> list[int | None] | None:
    """The offset in an inputs region of ``size`` bytes of each random input of ``plan`` (``None`` for the
    others), or ``None`` when they do not fit (the worker then stages its inputs itself)."""
    offsets: list[int | None] = []
    offset = 0
    for spec in plan.inputs:
        if spec.kind != "random" or spec.dtype not in wire.DTYPE_BYTES:
            offsets.append(None)
            continue
        offsets.append(offset)
        nbytes = math.prod(spec.shape) * wire.DTYPE_BYTES[spec.dtype]
        offset += -(-nbytes // ALIGN) * ALIGN
    return offsets if offset <= size else None


def view(buffer: Any, offset: int, spec: wire.InputSpec) -> Any:
    """A tensor of ``spec``'s dtype and shape over ``buffer`` (an mmap) at ``offset``, sharing its memory."""
    torch = torch_module()

    dtype = getattr(torch, spec.dtype)
    count = math.prod(spec.shape) * wire.DTYPE_BYTES[spec.dtype]
    if count == 0:
        return torch.empty(spec.shape, dtype=dtype)
    return torch.frombuffer(buffer, dtype=torch.uint8, count=count, offset=offset).view(dtype).reshape(spec.shape)
