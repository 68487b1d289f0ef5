"""Rotary position embedding from a cos/sin cache (FlashInfer Trace ``rope``).

``positions [num_tokens]`` index rows of ``cos_sin_cache [max_seq_len, rotary_dim]``: drawn in
``[0, max_seq_len)``.  Bytes: q and k read and written once, the positions, and the cache rows actually
referenced (distinct positions), not the whole cache.  FLOPs: three per rotated element
(``x1 * cos - x2 * sin``), ``3 * num_tokens * (num_qo_heads + num_kv_heads) * rotary_dim``.
"""

from __future__ import annotations

import random

from kictl.errors import RecordError
from kictl.families import DTYPE_BYTES, Family, Structure, register, tensor_bytes
from kictl.records import DefinitionSpec

CACHE = "cos_sin_cache"


class Rope(Family):
    name = "rope"
    structural_inputs = frozenset({"positions"})

    def check_axes(self, spec: DefinitionSpec, axes: dict[str, int]) -> None:
        if axes["max_seq_len"] < 1:
            raise RecordError(f"{spec.name}: max_seq_len must be at least 1")

    def synthesize(self, spec: DefinitionSpec, axes: dict[str, int], seed: int) -> dict[str, list[int]]:
        self.check_axes(spec, axes)
        rng = random.Random(seed)
        return {"positions": [rng.randrange(axes["max_seq_len"]) for _ in range(axes["num_tokens"])]}

    def bytes_moved(self, spec: DefinitionSpec, structure: Structure) -> int:
        axes = structure.axes
        total = 0
        for name, tensor in spec.inputs.items():
            if name == CACHE and tensor.shape:
                rows = len(set(structure.tensors.get("positions", ())))
                total += rows * axes[tensor.shape[-1]] * int(DTYPE_BYTES[tensor.dtype])
            else:
                total += tensor_bytes(spec, name, axes)
        return total + sum(tensor_bytes(spec, name, axes) for name in spec.outputs)

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        axes = structure.axes
        heads = axes.get("num_qo_heads", 0) + axes.get("num_kv_heads", 0)
        return 3 * axes["num_tokens"] * heads * axes["rotary_dim"] if "rotary_dim" in axes else None

    def relations(self, spec: DefinitionSpec) -> list[str]:
        return [
            f"{axis} >= 1"
            for axis in ("num_tokens", "num_qo_heads", "num_kv_heads", "max_seq_len")
            if axis in spec.axes
        ]


def register_all() -> None:
    register(Rope())
