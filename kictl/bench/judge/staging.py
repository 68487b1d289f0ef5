"""Inputs staged by kictl's parent (CPU, issue 27): the timed tensors live in memory the parent writes itself.

On the CPU each worker gets a second shared region at its start (``--fd-inputs``, a sealed memfd that both
sides map writable).  At ``Arm`` the worker places each random input of the timed tensors in it, at the offsets
``layout`` gives both sides, as a tensor over that memory, and runs ``setup()`` on them.  From then on the
parent stages every timed call's values itself (``Stager.stage``: an input set, rolled, and for a probe a few
values swapped), between an answer and the next request, while the worker's only thread of kictl's waits for
that request and nothing of the implementation's runs in kictl's code: there is no staging request for an
implementation's hook, mode or thread to do work in.  The tensors' version counters never move (the parent
writes their bytes, not torch), so a cache keyed on them, on their pointers or on their identity answers every
call like the first, which the audits find.  After an audited call and the last one, the parent compares what
is in the region with what it wrote (``Stager.changed``: ``inputsUnchanged`` judged on what the parent read).

Index tensors (a plan's structure, never restaged) stay in the worker's own memory, as ``setup()`` may plan on
them.  A GPU run's inputs are device memory and are still staged by the worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kictl.bench import wire
from kictl.bench.wire.regions import view
from kictl.bench.wire.tensors import materialize_plans
from kictl.bench.wire.values import _perturbed, _rolled, _same_bits

_SETS: dict[tuple[int, ...], tuple[Sequence[wire.Plan], list[list[Any]]]] = {}


def parent_sets(plans: Sequence[wire.Plan]) -> list[list[Any]]:
    """The timed input sets, made in the parent on the CPU (once per workload: every driver shares them)."""
    key = tuple(id(plan) for plan in plans)
    found = _SETS.get(key)
    if found is None or any(a is not b for a, b in zip(found[0], plans, strict=True)):
        _SETS.clear()  # one workload's sets at a time
        found = (list(plans), materialize_plans(list(plans), "cpu"))
        _SETS[key] = found
    return found[1]


class Stager:
    """The parent's side: writes each timed call's values into a worker's inputs region, and reads them back."""

    def __init__(
        self,
        region: wire.SharedRegion,
        plans: Sequence[wire.Plan],
        offsets: Sequence[int | None],
        specs: Sequence[wire.InputSpec],
    ) -> None:
        self.sets = parent_sets(plans)
        self.names = [spec.name for spec in specs]
        self.views = [
            None if offset is None else view(region.map, offset, spec)
            for offset, spec in zip(offsets, specs, strict=True)
        ]
        #: what the parent wrote for the call staged last, per input (``None`` where it writes nothing)
        self.written: list[Any] = [None] * len(self.views)

    def stage(self, index: int, shift: int, perturb: int = 0) -> None:
        """Input set ``index``, random inputs rolled by ``shift`` and, for a probe, ``perturb``'s pairs swapped."""
        for k, target in enumerate(self.views):
            if target is None:
                continue
            value = _perturbed(_rolled(self.sets[index][k], shift, k), perturb)
            target.copy_(value)
            self.written[k] = value

    def changed(self) -> list[str]:
        """The inputs whose bytes in the region differ from what the parent wrote for the last call."""
        return [
            name
            for name, target, value in zip(self.names, self.views, self.written, strict=True)
            if target is not None and value is not None and not _same_bits(target, value)
        ]
