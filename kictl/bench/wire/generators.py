"""Inputs whose values need a structure that independent random draws lack, drawn from a seed (worker side).

A family (``kictl.families``) names these per input (``Family.generated``); ``kictl.bench.judge.inputs`` plans them as
``generated:<name>`` sources, reseeded like random inputs for every input set, and every worker draws them
with ``draw`` on the CPU (the same values on any device) before moving them to its device:

``probability-rows``
    one probability distribution per row of the last axis: ``softmax(2 * N(0, 1))`` in float64, so every
    row is non-negative and sums to one to within the dtype's rounding;
``top-p``
    thresholds drawn uniformly in ``[0.5, 0.95]``;
``fp8-paged-index-cache``
    DeepSeek's packed FP8 key cache ``[num_pages, page_size, 1, head_dim + 4]`` (bytes as int8): per page,
    ``page_size * head_dim`` FP8 E4M3 values then ``page_size`` float32 scales in ``[0.5, 1.5)``; random bytes
    would hold NaN and infinite scales;
``per-head``, ``per-token-head``
    one ``N(0, 1)`` value per index of the first axis (``per-head``) or of the first two (``per-token-head``),
    the same along every later axis: Mamba-2's per-head parameters (``D``, ``dt_bias``) and time steps (``dt``),
    which its layers hold per head and broadcast over ``head_dim`` ("TIE_HDIM"), as FlashInfer's kernel takes them;
``per-head-decay``
    ``per-head`` with each head's value drawn uniformly in ``[-16, -1]``: Mamba-2's ``A = -exp(A_log)``, negative
    (a decaying state) in its initial range.

A process keeps its last few draws (``draw``): the distribution judge's trials call an implementation a
hundred times on one input (``kictl.bench.judge.session``), and drawing ``probs [128, 128256]`` in float64 on the
CPU took about 1.6 s a trial on the H100 machine (stop 54's catalogue call: 168 s of one workload's 100 trials),
where a copy of the kept draw takes milliseconds.  Every caller gets its own copy, so nothing a call does to
its inputs reaches the next call's.

torch is imported inside ``draw``: the families themselves stay light.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from kictl.bench.wire.lazy import torch_module
from kictl.errors import RecordError


def _generator(seed: int) -> Any:
    torch = torch_module()

    return torch.Generator(device="cpu").manual_seed(seed)


def probability_rows(shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    torch = torch_module()

    logits = torch.randn(shape, generator=_generator(seed), dtype=torch.float64) * 2.0
    return torch.softmax(logits, dim=-1).to(dtype)


def top_p(shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    torch = torch_module()

    return (0.5 + 0.45 * torch.rand(shape, generator=_generator(seed), dtype=torch.float64)).to(dtype)


def fp8_paged_index_cache(shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    torch = torch_module()

    if len(shape) != 4 or shape[-1] <= 4:
        raise RecordError(f"fp8-paged-index-cache needs [num_pages, page_size, heads, head_dim + 4], not {list(shape)}")
    pages, page_size, heads, width = shape
    head_dim = (width - 4) * heads
    generator = _generator(seed)
    values = torch.randn((pages, page_size * head_dim), generator=generator).to(torch.float8_e4m3fn)
    scales = 0.5 + torch.rand((pages, page_size * heads), generator=generator, dtype=torch.float32)
    packed = torch.cat([values.view(torch.uint8), scales.view(torch.uint8)], dim=1)
    return packed.view(torch.int8).reshape(shape).to(dtype)


def _tied(shape: tuple[int, ...], free: int, values: Any) -> Any:
    """``values`` (the shape of ``shape``'s first ``free`` axes) repeated along the rest, as a dense tensor."""
    if len(shape) < free:
        raise RecordError(f"a per-head input needs {free} axes at least, not {list(shape)}")
    view = values.reshape(shape[:free] + (1,) * (len(shape) - free))
    return view.expand(shape).contiguous()


def per_head(shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    torch = torch_module()

    return _tied(shape, 1, torch.randn(shape[:1], generator=_generator(seed))).to(dtype)


def per_token_head(shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    torch = torch_module()

    return _tied(shape, 2, torch.randn(shape[:2], generator=_generator(seed))).to(dtype)


def per_head_decay(shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    torch = torch_module()

    decay = -1.0 - 15.0 * torch.rand(shape[:1], generator=_generator(seed))
    return _tied(shape, 1, decay).to(dtype)


GENERATORS: dict[str, Callable[[tuple[int, ...], Any, int], Any]] = {
    "probability-rows": probability_rows,
    "top-p": top_p,
    "fp8-paged-index-cache": fp8_paged_index_cache,
    "per-head": per_head,
    "per-token-head": per_token_head,
    "per-head-decay": per_head_decay,
}


#: The draws a process keeps (``draw``): the newest few, at most ``KEPT_BYTES`` in all.
KEPT_DRAWS = 4
KEPT_BYTES = 1 << 30
_kept: OrderedDict[tuple[str, tuple[int, ...], str, int], Any] = OrderedDict()


def draw(name: str, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
    """The tensor generator ``name`` draws for ``shape`` and ``dtype`` from ``seed``, on the CPU: a new tensor
    every call, copied from the process's kept draw when it has one (the module's docstring says why).

    Raises ``RecordError`` for an unknown generator or a shape it cannot fill.
    """
    torch = torch_module()

    key = (name, tuple(shape), dtype, seed)
    kept = _kept.get(key)
    if kept is not None:
        _kept.move_to_end(key)
        return kept.clone()
    function = GENERATORS.get(name)
    if function is None:
        raise RecordError(f"no input generator {name!r}; known: {', '.join(sorted(GENERATORS))}")
    made = function(shape, getattr(torch, dtype), seed)
    if tuple(made.shape) != shape or math.prod(shape) != made.numel():  # pragma: no cover - generators keep shapes
        raise RecordError(f"generator {name} made {list(made.shape)}, not {list(shape)}")
    size = made.numel() * made.element_size()
    if size <= KEPT_BYTES:
        _kept[key] = made
        while len(_kept) > KEPT_DRAWS or sum(t.numel() * t.element_size() for t in _kept.values()) > KEPT_BYTES:
            _kept.popitem(last=False)
        return made.clone()
    return made
