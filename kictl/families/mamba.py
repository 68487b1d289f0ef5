"""Mamba-2 selective state update (FlashInfer Trace ``mamba_ssu``): one decode step of a state-space layer.

``state_batch_indices`` names each sequence's slot in the state cache: ``batch_size`` distinct slots in
``[0, state_cache_size)`` (distinct: each sequence writes its slot).  ``new_state`` is an output of the whole
cache's shape that may not alias the input, so every slot is read and written: bytes are the generic count.
FLOPs: per state element the decay, the input term and the output's dot product, four at least
(``4 * batch * nheads * head_dim * dstate``).

Mamba-2 holds ``A``, ``D`` and ``dt_bias`` per head and ``dt`` per token and head, broadcast over ``head_dim`` (and
``dstate`` for ``A``): the definitions give them their broadcast shapes and say so of ``A`` ("TIE_HDIM=True: one
scalar per head"), and the kernel they name, FlashInfer's ``selective_state_update``, takes them only as such
(stride 0 along ``head_dim``).  Independent values there are inputs no Mamba-2 layer makes, which FlashInfer
refuses (H100, stop 55: "dt.stride(1) must be 1, got 64" on every workload), so they are drawn tied: ``dt`` by the
``per-token-head`` generator, ``D`` and ``dt_bias`` by ``per-head``, ``A`` by ``per-head-decay`` (negative, as
``-exp(A_log)`` is).  The references compute with the full tensors, so an implementation is judged on them as they
are; one that reads only a head's first value is right on these inputs, as on a real layer's.
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

    def generated(self, spec: DefinitionSpec) -> dict[str, str]:
        tied = {
            "dt": ("per-token-head", ["batch_size", "nheads", "head_dim"]),
            "A": ("per-head-decay", ["nheads", "head_dim", "dstate"]),
            "D": ("per-head", ["nheads", "head_dim"]),
            "dt_bias": ("per-head", ["nheads", "head_dim"]),
        }
        return {
            name: generator
            for name, (generator, shape) in tied.items()
            if name in spec.inputs and list(spec.inputs[name].shape or ()) == shape
        }

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        axes = structure.axes
        if not {"batch_size", "nheads", "head_dim", "dstate"} <= axes.keys():
            return None
        return 4 * axes["batch_size"] * axes["nheads"] * axes["head_dim"] * axes["dstate"]

    def relations(self, spec: DefinitionSpec) -> list[str]:
        return ["batch_size >= 1", "batch_size <= state_cache_size"]


def register_all() -> None:
    register(MambaStateUpdate(), "mamba_ssu", "mamba")
