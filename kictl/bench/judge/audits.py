"""Audited calls judged as their outputs arrive, so that kictl's parent holds a bounded number of them (issue 40).

An audited timed call's outputs (read by the parent at the call's return on the CPU, sent by the worker on a
GPU) are kept only until the reference's outputs for the same values are there: then ``judge`` turns them into an
``AuditFinding`` (a digest of the bytes, for ``outputsFresh``; the never-written elements, for
``outputsFullyWritten``; what the comparison found, for ``timedOutputsCorrect``) and the tensors go.  The session
asks the reference for the audits still waiting (``Pending``) as soon as they hold ``PENDING_BYTES``, charging each
at least the definition's output size, so the outputs held at any time are bounded by the largest output set, not
by the number of calls audited (docs/bench.md, "The parent stays bounded").
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kictl.bench.judge import correctness
from kictl.bench.wire.checks import poisoned_elements
from kictl.bench.wire.lazy import torch_module

#: The session asks the reference for the waiting audits' outputs once these hold this many bytes (each charged
#: at least the definition's outputs): at most this plus one output set is held waiting, and as much again of the
#: reference's outputs while they are judged.
PENDING_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class AuditFinding:
    """What an audited call's outputs showed against the reference's, once judged (its tensors dropped)."""

    #: sha256 of the outputs' shapes, dtypes and bytes, and of the reference's (``outputsFresh`` compares them)
    digest: str
    reference_digest: str
    #: "N elements of NAME (LABEL) were never written", one per output with poison left in it
    poisoned: tuple[str, ...]
    #: why the outputs are wrong for the values the call got, or ``None`` when they are right
    wrong: str | None


#: A tensor of more bytes than this is hashed in chunks of this size, in threads, and the chunks' sha256 digests
#: in order: a 352 MB GEMM output took about 0.35 s on one core, twice per audit (stop 58: 1.1 s an audit on the
#: H100's host). The chunk size alone sets the digest, not the number of threads.
DIGEST_CHUNK = 8 << 20
#: threads that hash chunks (hashlib releases the GIL while it hashes)
DIGEST_THREADS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))
_pool: ThreadPoolExecutor | None = None


def _sha256(data: memoryview) -> bytes:
    return hashlib.sha256(data).digest()


def _hash_bytes(found: Any, data: memoryview) -> None:
    """Feed ``data`` to ``found``: whole when small, else its chunks' digests (``DIGEST_CHUNK``), hashed in threads."""
    global _pool
    if len(data) <= DIGEST_CHUNK:
        found.update(data)
        return
    chunks = [data[start : start + DIGEST_CHUNK] for start in range(0, len(data), DIGEST_CHUNK)]
    if DIGEST_THREADS == 1:
        parts = [_sha256(chunk) for chunk in chunks]
    else:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=DIGEST_THREADS, thread_name_prefix="kictl-digest")
        parts = list(_pool.map(_sha256, chunks))
    found.update(b"chunks:" + b"".join(parts))


def _flat_bytes(tensor: Any) -> Any:
    """The tensor's bytes as one flat uint8 tensor (a view where it is contiguous)."""
    torch = torch_module()

    return tensor.detach().contiguous().reshape(-1).view(torch.uint8)


def digest(outputs: Sequence[Any]) -> str:
    """sha256 over each tensor's shape, dtype and bytes (a large tensor's bytes as the digests of their chunks,
    ``DIGEST_CHUNK``): equal exactly for bit-identical outputs."""
    found = hashlib.sha256(str(len(outputs)).encode())
    for tensor in outputs:
        found.update(f"|{tuple(tensor.shape)}|{tensor.dtype}|".encode())
        flat = _flat_bytes(tensor)
        if flat.numel():
            _hash_bytes(found, memoryview(flat.numpy()).cast("B"))
    return found.hexdigest()


def output_bytes(outputs: list[Any] | str) -> int:
    """The bytes the tensors of ``outputs`` hold (0 for a reason there are none)."""
    if isinstance(outputs, str):
        return 0
    return sum(int(tensor.numel()) * int(tensor.element_size()) for tensor in outputs)


def judge(
    label: str,
    outputs: list[Any],
    reference: list[Any],
    *,
    names: Sequence[str],
    shapes: Sequence[tuple[int, ...]],
    dtypes: Sequence[str],
    tolerance: correctness.Tolerance,
    distribution: Callable[[Any], str | None] | None = None,
    declared: int | None = None,
) -> AuditFinding:
    """One audited call's outputs against the reference's on the same values (``label`` names the call in the
    findings).  ``distribution``, for outputs that are samples, says why a sample lies outside its distribution.
    Past the first ``declared`` (``None``: none), ``outputs`` are the inputs the reference writes: compared, but
    neither looked at for poison nor digested (their untouched elements hold the staged values)."""
    poisoned = []
    for name, tensor, want in zip(names[:declared], outputs, reference, strict=False):
        count = poisoned_elements(tensor, want)
        if count:
            poisoned.append(f"{count} elements of {name} ({label}) were never written")
    compared = correctness.compare_round(
        0, names, outputs, reference, shapes=shapes, dtypes=dtypes, tolerance=tolerance, declared=declared
    )
    wrong = None
    if compared.status != "passed":
        wrong = f"{label}: {compared.detail}"
    elif distribution is not None:
        why = distribution(outputs[0])
        wrong = f"{label}: {why}" if why else None
    return AuditFinding(*digests(outputs[:declared], reference[:declared]), tuple(poisoned), wrong)


def digests(outputs: Sequence[Any], reference: Sequence[Any]) -> tuple[str, str]:
    """(``digest`` of the outputs, of the reference's), the second taken only where the bytes differ."""
    found = digest(outputs)
    return found, found if _same_bytes(outputs, reference) else digest(reference)


def _same_bytes(outputs: Sequence[Any], reference: Sequence[Any]) -> bool:
    """Whether the two are the same tensors bit for bit (shape, dtype and bytes): then their digests are equal,
    and the reference's need not be taken (the reference's own runs, and a torch call the reference makes)."""
    torch = torch_module()

    if len(outputs) != len(reference):
        return False
    for tensor, want in zip(outputs, reference, strict=True):
        if not isinstance(want, torch.Tensor) or tensor.shape != want.shape or tensor.dtype != want.dtype:
            return False
        if not torch.equal(_flat_bytes(tensor), _flat_bytes(want)):
            return False
    return True


class Pending:
    """The audited outputs a session holds until the reference's are there: their bytes, each audit charged at
    least ``floor`` (the definition's output bytes), so that a worker sending small or empty outputs cannot make
    the parent ask the reference for more outputs than the budget holds."""

    def __init__(self, floor: int, budget: int | None = None) -> None:
        self.floor = max(1, floor)
        self.budget = PENDING_BYTES if budget is None else budget
        self.held = 0
        self.peak = 0

    def add(self, outputs: list[Any] | str) -> None:
        if isinstance(outputs, str):
            return
        self.held += max(self.floor, output_bytes(outputs))
        self.peak = max(self.peak, self.held)

    def full(self) -> bool:
        return self.held >= self.budget

    def clear(self) -> None:
        self.held = 0
