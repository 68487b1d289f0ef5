"""Comparing an implementation's outputs with the reference's (DESIGN §7, issue 4).

Per element, with ``x`` the implementation's value and ``y`` the reference's
(both widened to float64)::

    matched  <=>  y finite and x finite and |x - y| <= atol + rtol * |y|
              or  y is NaN and x is NaN
              or  y is +inf or -inf and x == y     (a -inf lse where the reference has -inf)

An output passes when its matched ratio (matched elements over all elements)
is at least the required ratio.  Shapes and dtypes must be the definition's
exactly (``incorrect_shape``, ``incorrect_dtype``).  The maximum absolute
error is over elements where both values are finite; the maximum relative
error is ``|x - y| / max(|y|, atol)`` over the same elements (``atol`` keeps
near-zero references from dominating; ``1e-12`` when ``atol`` is 0).
Comparisons run in chunks so that large outputs do not need float64 copies
of themselves.  Several rounds of fresh inputs are compared; the worst round
(lowest matched ratio, then largest absolute error) is what the run records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kictl.bench.wire.lazy import torch_module
from kictl.families import judges

COMPARATOR = "allclose |x-y| <= atol + rtol*|y|; NaN matches NaN; inf must equal; rel. error |x-y|/max(|y|,atol)"
DEFAULT_ATOL = 1e-2
DEFAULT_RTOL = 1e-2
DEFAULT_MATCHED_RATIO = 1.0
#: Added to a protocol's comparability family when its runs were judged at a tolerance looser than the
#: workload's default (``--atol``/``--rtol`` above it, ``--matched-ratio`` below): such runs form comparison
#: groups of their own, never the default one (issue 40).
LOOSER_TOLERANCE = "-looser-tolerance"
#: Elements per chunk and per torch thread (``chunk_elements``): four float64 buffers of 512 KiB a thread,
#: reused, stay near its core.  12.6 M bfloat16 elements compared (benchmarks/compare_speed.py at 40f91c7): on one
#: thread of the development machine 2.0 s in chunks of 4 M and 0.29 s in chunks of 32 K with a fresh
#: temporary per operation, 55-68 ms with the finite fast path in reused buffers; on the H200 machine's host,
#: 119 ms on one thread, 65 ms on 16 threads in chunks of 64 K, 19 ms on 16 threads in chunks of 1 M.
_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Tolerance:
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    required_matched_ratio: float = DEFAULT_MATCHED_RATIO
    #: the judge (``kictl.families.judges``): allclose, index-set, index-sequence or distribution
    judge: str = "allclose"
    max_total_variation: float = 0.2
    trials: int = 100

    @property
    def comparator(self) -> str:
        """What the run's correctness record names its judge by."""
        return judges.comparator(self.judge, trials=self.trials, limit=self.max_total_variation, default=COMPARATOR)

    def looser_than(self, default: Tolerance) -> bool:
        """Whether a run judged at this tolerance passes something ``default`` would fail."""
        return (
            self.atol > default.atol
            or self.rtol > default.rtol
            or self.required_matched_ratio < default.required_matched_ratio
        )


@dataclass(frozen=True, slots=True)
class OutputComparison:
    """One output of one round against the reference."""

    name: str
    status: str  # "passed", "incorrect_numerical", "incorrect_shape", "incorrect_dtype"
    detail: str | None
    maximum_absolute_error: float | None
    maximum_relative_error: float | None
    matched_ratio: float | None


@dataclass(frozen=True, slots=True)
class RoundComparison:
    """Every output of one round."""

    offset: int
    outputs: tuple[OutputComparison, ...]

    @property
    def status(self) -> str:
        for status in ("incorrect_shape", "incorrect_dtype", "incorrect_numerical"):
            if any(output.status == status for output in self.outputs):
                return status
        return "passed"

    @property
    def matched_ratio(self) -> float | None:
        ratios = [o.matched_ratio for o in self.outputs if o.matched_ratio is not None]
        return min(ratios) if ratios else None

    @property
    def maximum_absolute_error(self) -> float | None:
        errors = [o.maximum_absolute_error for o in self.outputs if o.maximum_absolute_error is not None]
        return max(errors) if errors else None

    @property
    def maximum_relative_error(self) -> float | None:
        errors = [o.maximum_relative_error for o in self.outputs if o.maximum_relative_error is not None]
        return max(errors) if errors else None

    @property
    def detail(self) -> str | None:
        details = [f"{o.name}: {o.detail}" for o in self.outputs if o.detail]
        return "; ".join(details) if details else None


def compare_output(
    name: str, got: Any, want: Any, *, shape: tuple[int, ...], dtype: str, tolerance: Tolerance
) -> OutputComparison:
    """Compare one output with the reference's; ``shape``/``dtype`` are the definition's."""
    torch = torch_module()

    if tuple(got.shape) != shape:
        return OutputComparison(
            name, "incorrect_shape", f"shape {list(got.shape)}, expected {list(shape)}", None, None, None
        )
    expected_dtype = getattr(torch, dtype)
    if got.dtype != expected_dtype:
        detail = f"dtype {str(got.dtype).removeprefix('torch.')}, expected {dtype}"
        return OutputComparison(name, "incorrect_dtype", detail, None, None, None)
    if tolerance.judge != "allclose":
        return _judged(name, got, want, shape, tolerance)
    if tuple(want.shape) != shape:
        raise ValueError(f"the reference's {name} has shape {list(want.shape)}, the definition says {list(shape)}")
    total = got.numel()
    if total == 0:
        return OutputComparison(name, "passed", None, 0.0, 0.0, 1.0)
    flat_x = got.detach().reshape(-1)
    flat_y = want.detach().reshape(-1)
    if tolerance.required_matched_ratio <= 1.0 and got.dtype == want.dtype and torch.equal(flat_x, flat_y):
        # equal values: every finite element is within any tolerance with no error, an infinity equals itself
        # (torch.equal is False wherever a NaN is, so outputs with NaNs take the element-wise path below)
        return OutputComparison(name, "passed", None, 0.0, 0.0, 1.0)
    floor = tolerance.atol if tolerance.atol > 0 else 1e-12
    matched, max_abs, max_rel = _compare_flat(flat_x, flat_y, tolerance, floor)
    ratio = matched / total
    if ratio >= tolerance.required_matched_ratio:
        return OutputComparison(name, "passed", None, max_abs, max_rel, ratio)
    detail = f"{total - matched} of {total} elements outside tolerance (matched ratio {ratio:.6g})"
    return OutputComparison(name, "incorrect_numerical", detail, max_abs, max_rel, ratio)


def _judged(name: str, got: Any, want: Any, shape: tuple[int, ...], tolerance: Tolerance) -> OutputComparison:
    """One output under a judge of ``kictl.families.judges`` (shape and dtype already checked).  A distribution
    is judged over all its trials (``judges.judge_distribution``); one call's samples need only be tokens."""
    if tolerance.judge == judges.DISTRIBUTION:
        found = judges.Judged("passed", None, None, None, None)
        if got.dtype.is_floating_point:
            found = judges.Judged("incorrect_dtype", "samples must be integers", None, None, None)
    else:
        if tuple(want.shape) != shape:
            raise ValueError(f"the reference's {name} has shape {list(want.shape)}, the definition says {list(shape)}")
        ordered = tolerance.judge == judges.INDEX_SEQUENCE
        found = judges.compare_indices(got, want, ordered=ordered, required_ratio=tolerance.required_matched_ratio)
    return OutputComparison(
        name,
        found.status,
        found.detail,
        found.maximum_absolute_error,
        found.maximum_relative_error,
        found.matched_ratio,
    )


def _compare_flat(flat_x: Any, flat_y: Any, tolerance: Tolerance, floor: float) -> tuple[int, float, float]:
    """Matched count, maximum absolute and relative error of two flat tensors, chunk by chunk in float64.

    A chunk whose every pair is finite (the largest ``|x - y|`` is finite: an infinity or NaN on either side
    makes it infinite or NaN) takes the plain rule in reused buffers, a few operations in all; any other chunk
    takes ``_general_chunk``, the whole rule.  Both give the same answer on a finite chunk.
    """
    torch = torch_module()

    total = flat_x.numel()
    chunk = chunk_elements()
    size = min(chunk, total)
    buffers = [torch.empty(size, dtype=torch.float64) for _ in range(4)]
    close_buffer = torch.empty(size, dtype=torch.bool)
    matched = 0
    max_abs = 0.0
    max_rel = 0.0
    for start in range(0, total, chunk):
        count = min(chunk, total - start)
        x, y, diff, bound = (buffer[:count] for buffer in buffers)
        x.copy_(flat_x[start : start + count])
        y.copy_(flat_y[start : start + count])
        torch.sub(x, y, out=diff).abs_()
        largest = float(diff.max())
        if not math.isfinite(largest):
            found = _general_chunk(x, y, tolerance, floor)
            matched += found[0]
            max_abs = max(max_abs, found[1])
            max_rel = max(max_rel, found[2])
            continue
        torch.abs(y, out=bound).mul_(tolerance.rtol).add_(tolerance.atol)
        matched += int(torch.count_nonzero(torch.le(diff, bound, out=close_buffer[:count])))
        max_abs = max(max_abs, largest)
        torch.abs(y, out=bound).clamp_(min=floor)
        max_rel = max(max_rel, float(diff.div_(bound).max()))
    return matched, max_abs, max_rel


def chunk_elements() -> int:
    """Elements per chunk of a comparison: ``_CHUNK`` for each of torch's threads (which split an operation
    only when each gets tens of thousands of elements)."""
    torch = torch_module()

    return _CHUNK * max(1, int(torch.get_num_threads()))


def _general_chunk(x: Any, y: Any, tolerance: Tolerance, floor: float) -> tuple[int, float, float]:
    """The element-wise rule of the module's docstring on one float64 chunk, NaNs and infinities included."""
    torch = torch_module()

    finite = torch.isfinite(x) & torch.isfinite(y)
    diff = torch.where(finite, (x - y).abs(), torch.zeros_like(x))
    close = finite & (diff <= tolerance.atol + tolerance.rtol * y.abs())
    both_nan = torch.isnan(x) & torch.isnan(y)
    same_inf = torch.isinf(y) & (x == y)
    matched = int(torch.count_nonzero(close | both_nan | same_inf))
    if not bool(finite.any()):
        return matched, 0.0, 0.0
    rel = diff / torch.clamp(y.abs(), min=floor)
    return matched, float(diff.max()), float(torch.where(finite, rel, torch.zeros_like(rel)).max())


def compare_round(
    offset: int,
    names: Sequence[str],
    got: Sequence[Any],
    want: Sequence[Any],
    *,
    shapes: Sequence[tuple[int, ...]],
    dtypes: Sequence[str],
    tolerance: Tolerance,
    declared: int | None = None,
) -> RoundComparison:
    """Every output of one round; ``got`` and ``want`` are in ``names`` order.

    Past the first ``declared`` (``None``: none) are the inputs the reference writes (docs/bench.md, "Inputs the
    reference writes"): every element of them within ``atol``/``rtol``, whatever the family's judge or matched
    ratio, for most of such an input is the staged values a call leaves alone, which a share would forgive a
    skipped write of."""
    exact = Tolerance(atol=tolerance.atol, rtol=tolerance.rtol, required_matched_ratio=1.0)
    outputs = tuple(
        compare_output(
            name,
            g,
            w,
            shape=shape,
            dtype=dtype,
            tolerance=tolerance if declared is None or k < declared else exact,
        )
        for k, (name, g, w, shape, dtype) in enumerate(zip(names, got, want, shapes, dtypes, strict=True))
    )
    return RoundComparison(offset=offset, outputs=outputs)


def worst_round(rounds: Sequence[RoundComparison]) -> RoundComparison:
    """The round the run reports: a failed one first, then lowest matched ratio, then largest error."""
    order = {"incorrect_shape": 0, "incorrect_dtype": 1, "incorrect_numerical": 2, "passed": 3}

    def key(item: RoundComparison) -> tuple[int, float, float]:
        return (order[item.status], item.matched_ratio or 0.0, -(item.maximum_absolute_error or 0.0))

    return min(rounds, key=key)


def outputs_identical(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two calls returned bit-identical outputs (same shapes, same bytes)."""
    torch = torch_module()

    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.numel() and not torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)):
            return False
    return True
