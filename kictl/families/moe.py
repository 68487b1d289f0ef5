"""Mixture of experts (FlashInfer Trace ``moe``): routing, two GEMMs per (token, expert) pair, SwiGLU.

Routing comes in two forms:

* **from logits** (``routing_logits [seq_len, num_experts]``; DeepSeek's grouped routing, renormalised top-k,
  Llama 4's top-1): the experts chosen depend on the logits' values, which kictl draws at random (the
  captured ones are blobs the public repository does not hold).  The bytes and FLOPs are then a lower bound
  that holds for *any* logits: every token picks ``top_k`` distinct experts, of which at least
  ``top_k - (num_experts - num_local_experts)`` are local, so at least that many experts' weights are read
  (all tokens may pick the same ones) and each token is multiplied through at least that many experts;
* **pre-computed** (``topk_ids [seq_len, top_k]``, int32 packing ``expert << 16 | bfloat16 weight bits``):
  synthesised as ``top_k`` distinct experts per token with positive weights that sum to about one; bytes and
  FLOPs are exact (the distinct experts' weights, ``seq_len * top_k`` pairs).

A pair costs ``2 * hidden * gemm1_out + 2 * intermediate * hidden`` FLOPs.  Weights tagged
``quantization:float4_e2m1fn_mxfp4`` count 4.25 bits each (FP4 values and an 8-bit scale per 32) whatever
dtype the definition hands them over in: a kernel may hold them quantized, and the floor stays below it.
"""

from __future__ import annotations

import random
import re
import struct

from kictl.errors import RecordError
from kictl.families import DTYPE_BYTES, Family, Structure, register, tensor_bytes, tensor_shape
from kictl.records import DefinitionSpec

_TOPK = re.compile(r"topk(\d+)")
#: Bytes per weight of an MXFP4 tensor: a 4-bit value and an 8-bit scale per 32 values.
MXFP4_BYTES = 0.5 + 1 / 32


def _bfloat16_bits(value: float) -> int:
    """The bfloat16 bit pattern nearest ``value`` (round to nearest even on the float32 bits)."""
    bits: int = struct.unpack(">I", struct.pack(">f", value))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


class Moe(Family):
    name = "moe"
    structural_inputs = frozenset({"topk_ids"})

    @staticmethod
    def top_k(spec: DefinitionSpec, axes: dict[str, int]) -> int:
        if "top_k" in axes:
            return axes["top_k"]
        found = _TOPK.search(spec.name)
        if found is None:
            raise RecordError(f"{spec.name}: no top_k axis, and the name states none (topkN)")
        return int(found.group(1))

    @staticmethod
    def experts(axes: dict[str, int]) -> tuple[int, int]:
        """(experts routed over, experts whose weights this call holds)."""
        local = axes.get("num_local_experts", axes.get("num_experts", 0))
        return axes.get("num_experts", local), local

    def check_axes(self, spec: DefinitionSpec, axes: dict[str, int]) -> None:
        total, _ = self.experts(axes)
        if self.top_k(spec, axes) > total:
            raise RecordError(f"{spec.name}: top_k exceeds the number of experts {total}")

    def synthesize(self, spec: DefinitionSpec, axes: dict[str, int], seed: int) -> dict[str, list[int]]:
        self.check_axes(spec, axes)
        rng = random.Random(seed)
        total, _ = self.experts(axes)
        top_k = self.top_k(spec, axes)
        packed: list[int] = []
        for _ in range(axes["seq_len"]):
            experts = rng.sample(range(total), top_k)
            raw = [rng.random() + 0.05 for _ in range(top_k)]
            weights = [value / sum(raw) for value in raw]
            packed.extend(
                (expert << 16) | _bfloat16_bits(weight) for expert, weight in zip(experts, weights, strict=True)
            )
        return {"topk_ids": packed}

    # ------------------------------------------------------------------ work

    def routing(self, spec: DefinitionSpec, structure: Structure) -> tuple[int, int]:
        """(distinct local experts whose weights must be read, local (token, expert) pairs), exact for
        pre-computed routing and a lower bound for routing from logits."""
        axes = structure.axes
        tokens = axes.get("seq_len", 0)
        if tokens == 0:
            return 0, 0
        if "topk_ids" in structure.tensors:
            experts = [value >> 16 for value in structure.tensors["topk_ids"]]
            return len(set(experts)), len(experts)
        total, local = self.experts(axes)
        least = max(0, min(local, self.top_k(spec, axes) - (total - local)))
        return least, tokens * least

    def _weight_bytes_per_element(self, spec: DefinitionSpec, dtype: str) -> float:
        quantized = any(tag.startswith("quantization:float4") for tag in spec.tags or ())
        return min(DTYPE_BYTES[dtype], MXFP4_BYTES) if quantized else DTYPE_BYTES[dtype]

    def bytes_moved(self, spec: DefinitionSpec, structure: Structure) -> int:
        axes = structure.axes
        experts, _ = self.routing(spec, structure)
        total = 0.0
        for name, tensor in spec.inputs.items():
            shape = tensor.shape or ()
            if len(shape) >= 2 and shape[0] in ("num_experts", "num_local_experts"):
                per_expert = 1
                for size in tensor_shape(spec, name, axes)[1:]:
                    per_expert *= size
                width: float = DTYPE_BYTES[tensor.dtype]
                if name.endswith("_weights"):
                    width = self._weight_bytes_per_element(spec, tensor.dtype)
                total += experts * per_expert * width
            else:
                total += tensor_bytes(spec, name, axes)
        total += sum(tensor_bytes(spec, name, axes) for name in spec.outputs)
        return int(total)

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        axes = structure.axes
        if not {"hidden_size", "intermediate_size"} <= axes.keys():
            return None
        gemm1 = axes.get("gemm1_out_size", 2 * axes["intermediate_size"])
        _, pairs = self.routing(spec, structure)
        return pairs * (2 * axes["hidden_size"] * gemm1 + 2 * axes["intermediate_size"] * axes["hidden_size"])

    def compute_dtype(self, spec: DefinitionSpec) -> str:
        tags = spec.tags or ()
        if any(tag.startswith("quantization:float4") for tag in tags):
            return "float4_e2m1fn"  # no GPU table lists it: the fastest figure is used, a safe bound
        if any(tag.startswith("quantization:float8") for tag in tags) or any(
            tensor.dtype.startswith("float8") for tensor in spec.inputs.values()
        ):
            return "float8_e4m3fn"
        return super().compute_dtype(spec)

    def notes(self, spec: DefinitionSpec, structure: Structure) -> dict[str, int]:
        experts, pairs = self.routing(spec, structure)
        return {"expertsRead": experts, "tokenExpertPairs": pairs}

    def relations(self, spec: DefinitionSpec) -> list[str]:
        return ["seq_len >= 1"] if "seq_len" in spec.axes else []


def register_all() -> None:
    register(Moe(), "fused-moe")
