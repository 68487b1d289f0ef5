"""The torch implementations of the catalogue's MoE definitions (``implementations/families/moe/``).

Which folder serves which MoE definition (by its input names, serves.json), and which stay their reference's
alone; each folder run through the real ``kictl bench`` on the CPU against a definition's reference (the
renormalize-routing ones: the Llama 4 definitions' weights, 16 x 16384 x 5120 and more, are too big for this
machine's CPU), and each compared in this process with a plain dense float32 MoE written here, on small sizes the
references cannot take (they hard-code theirs): every expert computed for every token, weighted by a dense
[tokens, experts] routing matrix.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, RunCli
from tests.test_catalogue_implementations import DEFINITIONS, FAMILIES, catalogue
from tests.test_catalogue_implementations import (
    test_torch_family_implementation_passes_kictl_bench_on_the_cpu as bench_on_the_cpu,
)

#: The folder each MoE definition is served by (by name prefix, and whether routing_bias is an input); None:
#: its reference alone.
SERVED = {
    ("moe_fp8_block_scale_renorm_", False): "torch_moe_fp8_block",
    ("moe_fp8_block_scale_ds_routing_", True): None,  # top_k, n_group, topk_group are no axes: not told
    ("trtllm_fp8_per_tensor_scale_moe_", False): "torch_moe_fp8_per_tensor",
    ("trtllm_fp8_per_tensor_scale_moe_", True): "torch_moe_fp8_per_tensor_llama4",
    ("trtllm_fp4_block_scale_moe_", False): "torch_moe_dense",
    ("trtllm_fp4_block_scale_moe_", True): "torch_moe_dense_llama4",
    ("trtllm_fp4_block_scale_routed_moe_", False): None,  # one input list, two meanings of the weights
}
MOE = FAMILIES / "moe"
FOLDERS = sorted(folder for folder in SERVED.values() if folder is not None)


def _implementation(folder: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{folder}_under_test", MOE / folder / "moe.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_moe_definition_is_served_by_its_folder_or_by_its_reference_alone_with_the_reason() -> None:
    fresh = copy.deepcopy([item for item in DEFINITIONS.values() if item.family == "moe"])  # plan() fills them in
    chosen, _ = catalogue.plan(
        fresh, wanted=[], families=[], skip=[], held=None, registry_root=REPO_ROOT, flashinfer=True
    )
    by_name = {item.name: item for item in chosen}
    seen = set()
    for item in DEFINITIONS.values():
        if item.family != "moe":
            continue
        key = next(key for key in SERVED if item.name.startswith(key[0]) and ("routing_bias" in item.inputs) == key[1])
        seen.add(key)
        names = [path.name for path in by_name[item.name].implementations]
        folder = SERVED[key]
        if folder is None:
            assert names == ["reference"], item.name
            assert "Blackwell (sm100) only" in by_name[item.name].reference_only
        else:
            assert names == ["reference", folder], item.name
            assert not by_name[item.name].reference_only
            parameters = inspect.signature(_implementation(folder).run).parameters
            positional = [name for name, p in parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
            assert positional == item.inputs, item.name
            assert "top_k" in by_name[item.name].axes  # a constant axis kictl passes
    assert seen == set(SERVED)


@pytest.mark.parametrize("folder", FOLDERS)
def test_top_k_is_a_keyword_only_parameter_and_nothing_else_is(folder: str) -> None:
    parameters = inspect.signature(_implementation(folder).run).parameters
    keyword_only = [name for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY]
    assert keyword_only == ["top_k"]
    assert parameters["top_k"].default is inspect.Parameter.empty  # always told, never guessed


# --------------------------------------------------------------------------- a plain dense MoE, small sizes

E, H, INTER, T, TOP_K, BLOCK = 8, 256, 128, 5, 2, 128


def _routing(logits: Any, top_k: int, *, llama4: bool) -> Any:
    """[T, E] float32: each token's routing weight per expert, zero for experts it did not choose."""
    import torch

    scores = torch.sigmoid(logits.float()) if llama4 else logits.float()
    values, chosen = torch.topk(scores, k=top_k, dim=-1)
    weights = values if llama4 else torch.softmax(values, dim=-1)
    return torch.zeros(logits.shape, dtype=torch.float32).scatter(1, chosen, weights)


def _dense_moe(x: Any, w13: Any, w2: Any, routing: Any, *, on_input: bool, scales: tuple[Any, ...] = ()) -> Any:
    """Every expert for every token, float32: SwiGLU with the first half of W13's output linear, the second the
    gate; the routing weight scales the expert's input (Llama 4) or its output; optional per-expert scales of the
    act half, the gate half and the output (per-tensor FP8)."""
    import torch

    g1 = torch.einsum("th,eoh->teo", x, w13)  # [T, E, 2I]
    if on_input:
        g1 = g1 * routing[:, :, None]  # (w x) @ W13.T
    act, gate = g1[..., :INTER], g1[..., INTER:]
    if scales:
        act, gate = act * scales[0][None, :, None], gate * scales[1][None, :, None]
    out = torch.einsum("tei,ehi->teh", torch.nn.functional.silu(gate) * act, w2)  # [T, E, H]
    if scales:
        out = out * scales[2][None, :, None]
    if not on_input:
        out = out * routing[:, :, None]
    return out.sum(dim=1)


def _logits() -> Any:
    """Every token picks expert 2 (one expert with several tokens); expert 7 is never picked (one unused)."""
    import torch

    logits = torch.randn(T, E) * 0.1  # weights well away from 0 and 1, so their side (input, output) matters
    logits[:, 2] = 1.0
    logits[:, 7] = -5.0
    return logits.to(torch.bfloat16)


def _fp8(*shape: int) -> Any:
    import torch

    return (torch.randn(*shape) * 2).to(torch.float8_e4m3fn)


def _assert_bf16_close(got: Any, want: Any) -> None:
    import torch

    assert got.dtype == torch.bfloat16
    assert got.shape == (T, H)
    torch.testing.assert_close(got.float(), want, rtol=1.6e-2, atol=1e-2 * float(want.abs().max()))


def test_fp8_block_scale_matches_a_dense_moe_on_the_dequantized_weights() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    x, x_scale = _fp8(T, H), torch.rand(H // BLOCK, T) + 0.5  # the hidden states' scales: [H/128, T]
    w13, w13_scale = _fp8(E, 2 * INTER, H), torch.rand(E, 2 * INTER // BLOCK, H // BLOCK) * 0.02
    w2, w2_scale = _fp8(E, H, INTER), torch.rand(E, H // BLOCK, INTER // BLOCK) * 0.02
    logits = _logits()

    def dequantized(values: Any, scales: Any, dims: tuple[int, ...]) -> Any:
        for dim in dims:
            scales = scales.repeat_interleave(BLOCK, dim=dim)
        return values.float() * scales

    want = _dense_moe(
        dequantized(x, x_scale.t(), (1,)),
        dequantized(w13, w13_scale, (1, 2)),
        dequantized(w2, w2_scale, (1, 2)),
        _routing(logits, TOP_K, llama4=False),
        on_input=False,
    )
    got = _implementation("torch_moe_fp8_block").run(logits, x, x_scale, w13, w13_scale, w2, w2_scale, top_k=TOP_K)
    _assert_bf16_close(got, want)


@pytest.mark.parametrize("llama4", [False, True], ids=["renormalize", "llama4"])
def test_fp8_per_tensor_scale_matches_a_dense_moe_with_its_per_expert_scales(llama4: bool) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    x, w13, w2 = _fp8(T, H), _fp8(E, 2 * INTER, H), _fp8(E, H, INTER)
    scales = (torch.rand(E) * 0.02 + 0.01, torch.rand(E) * 0.02 + 0.01, torch.rand(E) * 0.02 + 0.01)
    logits, bias = _logits(), torch.randn(E).to(torch.bfloat16)
    want = _dense_moe(
        x.float(), w13.float(), w2.float(), _routing(logits, TOP_K, llama4=llama4), on_input=llama4, scales=scales
    )
    if llama4:
        run = _implementation("torch_moe_fp8_per_tensor_llama4").run
        got = run(logits, bias, x, w13, scales[0], scales[1], w2, scales[2], top_k=TOP_K)
    else:
        got = _implementation("torch_moe_fp8_per_tensor").run(logits, x, w13, *scales[:2], w2, scales[2], top_k=TOP_K)
    _assert_bf16_close(got, want)


@pytest.mark.parametrize("llama4", [False, True], ids=["renormalize", "llama4"])
def test_dense_matches_a_dense_moe(llama4: bool) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    x, w13, w2 = (
        torch.randn(T, H).to(torch.bfloat16),
        torch.randn(E, 2 * INTER, H) * 0.1,
        torch.randn(E, H, INTER) * 0.1,
    )
    logits, bias = _logits(), torch.randn(E).to(torch.bfloat16)
    want = _dense_moe(x.float(), w13, w2, _routing(logits, TOP_K, llama4=llama4), on_input=llama4)
    if llama4:
        got = _implementation("torch_moe_dense_llama4").run(logits, bias, x, w13, w2, top_k=TOP_K)
    else:
        got = _implementation("torch_moe_dense").run(logits, x, w13, w2, top_k=TOP_K)
    _assert_bf16_close(got, want)
    # the routing weight's side matters (SwiGLU is not linear): the other side is not close
    other = _dense_moe(x.float(), w13, w2, _routing(logits, TOP_K, llama4=llama4), on_input=not llama4)
    assert not torch.allclose(got.float(), other, rtol=1.6e-2, atol=1e-2 * float(other.abs().max()))


# --------------------------------------------------------------------------- through kictl bench, on the CPU

#: The smallest workload of the definition with the smallest E*H*I of each signature the CPU can hold (about
#: 15 to 25 s each: the reference dequantizes every expert's weights, twice with the audited call).
CPU_CASES = [
    ("moe_fp8_block_scale_renorm_topk10_e128_h2048_i512", "t1", "moe/torch_moe_fp8_block"),
    ("trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768", "t1", "moe/torch_moe_fp8_per_tensor"),
    ("trtllm_fp4_block_scale_moe_topk10_e128_h2048_i512", "t1", "moe/torch_moe_dense"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("definition", "workload", "implementation"), CPU_CASES)
def test_torch_moe_passes_kictl_bench_on_the_cpu(
    cli: RunCli, tmp_path: Path, definition: str, workload: str, implementation: str
) -> None:
    """As tests/test_catalogue_implementations.py runs every other torch family implementation: kictl passes
    ``top_k`` (a constant axis) and judges the output against the definition's own reference."""
    bench_on_the_cpu(cli, tmp_path, definition, workload, implementation)
