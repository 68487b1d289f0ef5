"""Mamba-2 selective state update (FlashInfer Trace ``mamba_ssu``): one decode step of a state-space layer.

``state_batch_indices`` names each sequence's slot in the state cache: ``batch_size`` distinct slots in
``[0, state_cache_size)`` (distinct: each sequence writes its slot).  ``new_state`` is an output of the whole
cache's shape that may not alias the input, so every slot is read and written: bytes are the generic count.
FLOPs: per state element the decay, the input term and the output's dot product, four at least
(``4 * batch * nheads * head_dim * dstate``).
"""

from __future__ import annotations

import random

from kictl.errors import RecordError
from kictl.families import Family, Structure, register
from kictl.records import DefinitionSpec


class MambaStateUpdate(Family):
    name = "mamba-ssu"
    structural_inputs = frozenset({"state_batch_indices"})

    def check_axes(self, spec: DefinitionSpec, axes: dict[str, int]) -> None:
        if axes["state_cache_size"] < axes["batch_size"]:
            raise RecordError(
                f"{spec.name}: state_cache_size {axes['state_cache_size']} < batch_size {axes['batch_size']}"
            )

    def synthesize(self, spec: DefinitionSpec, axes: dict[str, int], seed: int) -> dict[str, list[int]]:
        self.check_axes(spec, axes)
        return {"state_batch_indices": random.Random(seed).sample(range(axes["state_cache_size"]), axes["batch_size"])}

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        axes = structure.axes
        if not {"batch_size", "nheads", "head_dim", "dstate"} <= axes.keys():
            return None
        return 4 * axes["batch_size"] * axes["nheads"] * axes["head_dim"] * axes["dstate"]

    def relations(self, spec: DefinitionSpec) -> list[str]:
        return ["batch_size >= 1", "batch_size <= state_cache_size"]


def register_all() -> None:
    register(MambaStateUpdate(), "mamba_ssu", "mamba")
