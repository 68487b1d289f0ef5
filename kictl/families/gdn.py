"""Gated delta net (FlashInfer Trace ``gdn``): a linear-attention recurrence over a ``[heads, V, K]`` state.

Per token and value head the state ``S`` (``head_size`` squared) is decayed, corrected by a rank-one delta
update and read by the query.  Whatever the algorithm (the recurrent form, or the chunked form of prefill
kernels), each token and head needs at least ``k @ S`` or its chunked equivalent for the state update and
``q @ S`` for the output: FLOPs are counted as ``4 * tokens * num_v_heads * head_size ** 2``, a lower bound.

Structure: prefill's ``cu_seqlens`` (the sequences' boundaries: from 0 to ``total_seq_len``, never
decreasing) and MTP's ``initial_state_indices`` (``batch_size`` distinct slots of the state pool, distinct
because each sequence writes its slot).  Bytes count every input read once and every output written once,
except MTP's ``intermediate_states_buffer``, a scratch buffer the reference writes in place and no output
holds.
"""

from __future__ import annotations

import random

from kictl.errors import RecordError
from kictl.families import Family, Structure, register, tensor_bytes
from kictl.families.attention import split_evenly
from kictl.records import DefinitionSpec

SCRATCH = frozenset({"intermediate_states_buffer"})


class GatedDeltaNet(Family):
    name = "gdn"
    structural_inputs = frozenset({"cu_seqlens", "initial_state_indices"})

    def check_axes(self, spec: DefinitionSpec, axes: dict[str, int]) -> None:
        if "initial_state_indices" in spec.inputs and axes["pool_size"] < axes["batch_size"]:
            raise RecordError(f"{spec.name}: pool_size {axes['pool_size']} < batch_size {axes['batch_size']}")
        if "cu_seqlens" in spec.inputs and axes["num_seqs"] < 1:
            raise RecordError(f"{spec.name}: num_seqs must be at least 1")

    def synthesize(self, spec: DefinitionSpec, axes: dict[str, int], seed: int) -> dict[str, list[int]]:
        self.check_axes(spec, axes)
        rng = random.Random(seed)
        made: dict[str, list[int]] = {}
        if "cu_seqlens" in spec.inputs:
            lengths = split_evenly(axes["total_seq_len"], axes["num_seqs"])
            rng.shuffle(lengths)
            bounds = [0]
            for length in lengths:
                bounds.append(bounds[-1] + length)
            made["cu_seqlens"] = bounds
        if "initial_state_indices" in spec.inputs:
            made["initial_state_indices"] = rng.sample(range(axes["pool_size"]), axes["batch_size"])
        return made

    @staticmethod
    def tokens(axes: dict[str, int]) -> int:
        if "total_seq_len" in axes:
            return axes["total_seq_len"]
        return axes["batch_size"] * axes.get("seq_len", 1)

    def bytes_moved(self, spec: DefinitionSpec, structure: Structure) -> int:
        names = [name for name in (*spec.inputs, *spec.outputs) if name not in SCRATCH]
        return sum(tensor_bytes(spec, name, structure.axes) for name in names)

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        axes = structure.axes
        if not {"num_v_heads", "head_size"} <= axes.keys():
            return None
        return 4 * self.tokens(axes) * axes["num_v_heads"] * axes["head_size"] ** 2

    def relations(self, spec: DefinitionSpec) -> list[str]:
        out = []
        if "batch_size" in spec.axes:
            out.append("batch_size >= 1")
        if "pool_size" in spec.axes:
            out.append("batch_size <= pool_size")
        if "num_seqs" in spec.axes:
            out += ["num_seqs >= 1", "total_seq_len >= 1"]
        if "seq_len" in spec.axes and spec.axes["seq_len"].type == "var":
            out.append("seq_len >= 2")
        return out


def register_all() -> None:
    register(GatedDeltaNet(), "gated-delta-net")
