"""The generated workload suite of a catalogue definition that ships no workload (DESIGN §16).

The rule (``SUITE_RULE``, also in docs/importing.md): the variable axes are swept over
the values serving stacks use, 8 workloads a definition:

- token counts (GEMM ``M``, RMSNorm rows, MoE ``seq_len``, RoPE ``num_tokens``):
  1, 4, 16, 64, 256, 1024, 4096, 8192;
- request batches (sampling, GDN and Mamba decode): 1, 2, 4, 8, 16, 64, 128, 256;
- decode attention (paged, and sparse DSA): (batch, KV length) = (1, 512), (1, 8192),
  (4, 2048), (16, 1024), (32, 4096), (64, 512), (128, 1024), (256, 256); DSA takes
  lengths of at least its ``topk`` (2048);
- prefill attention (paged, ragged, GDN prefill): (batch, length) with at most 8192
  tokens in the batch: (1, 16), (1, 128), (1, 512), (1, 2048), (1, 8192), (2, 1024),
  (4, 2048), (8, 512); causal prefill with no cached prefix (queries = keys);
- GDN multi-token prediction: (batch, draft tokens) = (1, 2), (1, 4), (4, 2), (8, 4),
  (16, 2), (32, 4), (64, 2), (64, 4).

Lengths stay within 8192, inside every catalogue model's context.  Derived axes follow
the definition: ``len_indptr = batch + 1``, ``num_kv_indices = batch * ceil(length /
page_size)``, ``num_pages = num_kv_indices + 1`` (one free page), Mamba's
``state_cache_size = 2 * batch``, GDN's ``pool_size = batch``.

Inputs: every integer tensor input is index structure, ``synthesized`` by the family
from the axes; every other tensor is ``random``; seeds are recorded in the line
(workload ``i`` of the suite: structure seed ``10 i``, the ``k``-th random input
``10 i + k``).  Scalars: ``sm_scale`` is ``1/sqrt(head_dim)`` for GQA and DeepSeek's
softmax scale (``0.1352337747812271``, as the source's shipped MLA workloads give it)
for MLA and DSA; GDN's ``scale`` is ``1/sqrt(head_size)``; MoE's
``local_expert_offset`` is 0 and ``routed_scaling_factor`` 2.5 (DeepSeek-V3's, as the
shipped MoE workloads give it).
"""

from __future__ import annotations

import math
from typing import Any

from kictl.errors import RecordError
from kictl.records import DefinitionSpec

SUITE_RULE = "generated from the axes by kictl's suite rule (docs/importing.md#generated-suites), not captured"
TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 8192)
BATCHES = (1, 2, 4, 8, 16, 64, 128, 256)
DECODE = ((1, 512), (1, 8192), (4, 2048), (16, 1024), (32, 4096), (64, 512), (128, 1024), (256, 256))
SPARSE_DECODE = ((1, 2048), (1, 8192), (4, 4096), (16, 2048), (32, 4096), (64, 2048), (128, 2048), (256, 2048))
PREFILL = ((1, 16), (1, 128), (1, 512), (1, 2048), (1, 8192), (2, 1024), (4, 2048), (8, 512))
MTP = ((1, 2), (1, 4), (4, 2), (8, 4), (16, 2), (32, 4), (64, 2), (64, 4))
#: DeepSeek-V3's MLA softmax scale (1/sqrt(192) times its YaRN mscale squared), as the shipped workloads give it.
DEEPSEEK_SM_SCALE = 0.1352337747812271
ROUTED_SCALING_FACTOR = 2.5
INDEX_DTYPES = frozenset({"int32", "int64"})

Point = tuple[str, dict[str, int]]


def _const(spec: DefinitionSpec, name: str, default: int = 1) -> int:
    axis = spec.axes.get(name)
    return axis.value if axis is not None and axis.type == "const" else default


def _var(spec: DefinitionSpec) -> frozenset[str]:
    return frozenset(name for name, axis in spec.axes.items() if axis.type == "var")


def _paged(spec: DefinitionSpec, batch: int, length: int, *, prefill: bool) -> dict[str, int]:
    page_size = _const(spec, "page_size")
    indices = batch * math.ceil(length / page_size)
    axes = {"len_indptr": batch + 1, "num_kv_indices": indices, "num_pages": indices + 1, "batch_size": batch}
    if prefill:
        axes["total_q"] = batch * length
    return axes


def _points(spec: DefinitionSpec) -> list[Point]:
    """Label and variable axes of each workload of the suite; raises ``RecordError`` for axes no rule covers."""
    var = _var(spec)
    family = spec.family
    if var == {"M"}:
        return [(f"m{t}", {"M": t}) for t in TOKENS]
    if family == "rmsnorm" and var == {"batch_size"}:
        return [(f"t{t}", {"batch_size": t}) for t in TOKENS]
    if family == "moe" and var == {"seq_len"}:
        return [(f"t{t}", {"seq_len": t}) for t in TOKENS]
    if family in ("sampling", "gdn") and var == {"batch_size"}:
        return [(f"b{b}", {"batch_size": b}) for b in BATCHES]
    if family == "mamba-ssu" and var == {"batch_size", "state_cache_size"}:
        return [(f"b{b}", {"batch_size": b, "state_cache_size": 2 * b}) for b in BATCHES]
    if family == "rope" and var == {"num_tokens", "num_qo_heads", "num_kv_heads", "max_seq_len"}:
        heads = {"num_qo_heads": 48, "num_kv_heads": 8, "max_seq_len": 8192}  # MiniMax-M2, its tag's model
        return [(f"t{t}", {"num_tokens": t, **heads}) for t in TOKENS]
    if family == "gdn" and var == {"batch_size", "seq_len", "pool_size"}:
        return [(f"b{b}_t{t}", {"batch_size": b, "seq_len": t, "pool_size": b}) for b, t in MTP]
    if family == "gdn" and var == {"total_seq_len", "num_seqs", "len_cu_seqlens"}:
        return [(f"b{b}_q{n}", {"total_seq_len": b * n, "num_seqs": b, "len_cu_seqlens": b + 1}) for b, n in PREFILL]
    if var == {"total_q", "total_kv", "len_indptr"}:  # ragged prefill
        return [(f"b{b}_q{n}", {"len_indptr": b + 1, "total_q": b * n, "total_kv": b * n}) for b, n in PREFILL]
    if var == {"num_tokens", "num_pages"}:  # DSA sparse attention over a decode batch
        page_size = _const(spec, "page_size")
        return [
            (f"b{b}_kv{n}", {"num_tokens": b, "num_pages": b * math.ceil(n / page_size) + 1}) for b, n in SPARSE_DECODE
        ]
    if var == {"batch_size", "max_num_pages", "num_pages"}:  # DSA indexer
        page_size = _const(spec, "page_size")
        return [
            (
                f"b{b}_kv{n}",
                {
                    "batch_size": b,
                    "max_num_pages": math.ceil(n / page_size),
                    "num_pages": b * math.ceil(n / page_size) + 1,
                },
            )
            for b, n in SPARSE_DECODE
        ]
    if {"len_indptr", "num_kv_indices", "num_pages"} <= var and var <= {
        "len_indptr",
        "num_kv_indices",
        "num_pages",
        "batch_size",
        "total_q",
    }:
        prefill = "total_q" in var
        chosen = PREFILL if prefill else DECODE
        out = []
        for b, n in chosen:
            axes = _paged(spec, b, n, prefill=prefill)
            out.append((f"b{b}_{'q' if prefill else 'kv'}{n}", {k: v for k, v in axes.items() if k in var}))
        return out
    raise RecordError(f"{spec.name}: no suite rule covers the variable axes {', '.join(sorted(var))}")


def _scalar(spec: DefinitionSpec, name: str) -> bool | int | float:
    if name == "sm_scale":
        if "head_dim" in spec.axes:
            return 1.0 / math.sqrt(_const(spec, "head_dim"))
        if spec.family.startswith(("mla-", "dsa-")):
            return DEEPSEEK_SM_SCALE
    if name == "scale" and "head_size" in spec.axes:
        return 1.0 / math.sqrt(_const(spec, "head_size"))
    if name == "local_expert_offset":
        return 0
    if name == "routed_scaling_factor":
        return ROUTED_SCALING_FACTOR
    raise RecordError(f"{spec.name}: no suite rule gives the scalar {name}")


def generated_suite(spec: DefinitionSpec) -> list[tuple[str, dict[str, Any]]]:
    """``(label, workload spec without definitionDigest)`` per workload; raises ``RecordError`` when no rule fits."""
    out: list[tuple[str, dict[str, Any]]] = []
    for number, (label, axes) in enumerate(_points(spec), start=1):
        inputs: dict[str, Any] = {}
        drawn = 0
        for name, tensor in spec.inputs.items():
            if tensor.shape is None:
                inputs[name] = {"type": "scalar", "value": _scalar(spec, name)}
            elif tensor.dtype in INDEX_DTYPES:
                inputs[name] = {"type": "synthesized", "seed": 10 * number}
            else:
                drawn += 1
                inputs[name] = {"type": "random", "seed": 10 * number + drawn}
        out.append((label, {"axes": axes, "inputs": inputs}))
    return out
