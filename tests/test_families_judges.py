"""Judges that fit the output (issue 42): each catches a cheat, and passes honest code the default would fail.

The cheats live in tests/assets/judges/ (their definitions are this module's or the catalogue's, not the
exploit corpus's sessions): a sampler that returns the argmax, top-k indices off by one (within allclose's
rtol), the right top-k in the wrong order, FP8 maths wrong on one element in ten.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kictl.bench.judge import correctness
from kictl.bench.judge.inputs import plan_inputs
from kictl.bench.judge.session import BenchOptions, run_bench, tolerance_for
from kictl.bench.wire.generators import probability_rows
from kictl.bench.wire.tensors import materialize_one
from kictl.families import judges
from kictl.records import DefinitionSpec, StoredRecord, WorkloadSpec, new_record
from tests.bench.conftest import UNSANDBOXED
from tests.conftest import ASSETS, copy_bundled
from tests.families_catalogue import definitions_of, run_reference, small_workload

JUDGES = ASSETS / "judges"


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """This module's in-process torch work (a reference sampler 100 times, 40 inputs' distributions) on one
    thread: on two threads torch's sort of a 128,256-token row took 3.5 times the CPU (1.35 against 0.38 CPU-s for
    ten reference calls), and the two tests 38 s against 16 s at load 7."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, JUDGES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inputs(spec: DefinitionSpec, workload: StoredRecord) -> dict[str, Any]:
    plan = plan_inputs(spec, workload, tuple(spec.inputs), None, offset=1)
    return {source.name: materialize_one(source, "cpu") for source in plan.sources}


# --------------------------------------------------------------------------- distribution


@pytest.mark.heavy
def test_the_distribution_judge_passes_the_reference_and_catches_the_argmax() -> None:
    """The catalogue's top-k sampler, 100 calls on one generated input: the definition's own reference passes,
    the argmax sampler does not (every one of its samples is inside the support)."""
    spec = next(s for s in definitions_of("sampling") if s.name == "top_k_sampling_from_probs_v128256")
    inputs = _inputs(spec, small_workload(spec, ["top_k"]))
    args = [inputs[name] for name in spec.inputs]
    honest = [run_reference(spec, args) for _ in range(judges.DEFAULT_TRIALS)]
    found = judges.judge_distribution(inputs, honest, limit=judges.DEFAULT_MAX_TOTAL_VARIATION)
    assert found.status == "passed", found.detail
    cheat = _module("judge_sampling_argmax")
    argmax = [cheat.run(*args) for _ in range(judges.DEFAULT_TRIALS)]
    _, support = judges.expected_distribution(inputs["probs"], inputs["top_k"])
    assert bool(support[torch.arange(2), argmax[0]].all())  # inside the support: only the test catches it
    caught = judges.judge_distribution(inputs, argmax, limit=judges.DEFAULT_MAX_TOTAL_VARIATION)
    assert caught.status == "incorrect_numerical"
    assert caught.maximum_absolute_error is not None
    assert caught.maximum_absolute_error > 0.5
    assert caught.detail is not None
    assert "total variation" in caught.detail


def test_honest_samplers_pass_over_many_inputs_and_samples_outside_the_filter_do_not() -> None:
    """Forty inputs (top-k, top-p, both), each with its own honest sampler's 100 trials: none fails (a judge
    that flags honest code is a defect); a sampler drawing from the unfiltered probabilities is caught by the
    support, and the argmax and one favouring the most probable tokens by the test."""
    for seed in range(40):
        probs = probability_rows((3, 500), torch.float32, seed)
        top_k = torch.tensor([16, 40, 200], dtype=torch.int32) if seed % 3 != 1 else None
        top_p = torch.tensor([0.6, 0.8, 0.95]) if seed % 3 != 0 else None
        expected, _ = judges.expected_distribution(probs, top_k, top_p)
        generator = torch.Generator().manual_seed(1000 + seed)
        samples = [torch.multinomial(expected, 1, generator=generator).reshape(-1) for _ in range(100)]
        inputs = {"probs": probs, "top_k": top_k, "top_p": top_p}
        found = judges.judge_distribution(inputs, samples, limit=0.2)
        assert found.status == "passed", (seed, found.detail)
    argmax = [_module("judge_sampling_argmax").run(probs, top_k) for _ in range(100)]
    assert judges.judge_distribution(inputs, argmax, limit=0.2).status == "incorrect_numerical"
    unfiltered = [torch.multinomial(probs.double(), 1, generator=generator).reshape(-1) for _ in range(100)]
    outside = judges.judge_distribution(inputs, unfiltered, limit=0.2)
    assert outside.status == "incorrect_numerical"
    assert outside.detail is not None
    assert "outside the filtered distribution" in outside.detail
    sharpened = expected**4 / (expected**4).sum(-1, keepdim=True)
    greedy = [torch.multinomial(sharpened, 1, generator=generator).reshape(-1) for _ in range(100)]
    assert judges.judge_distribution(inputs, greedy, limit=0.2).status == "incorrect_numerical"


def _filtered_row(row: list[float], k: int, p: float) -> tuple[list[float], set[int]]:
    """One row as the judge's contract states it, in plain Python: the expected distribution and support."""
    order = sorted(range(len(row)), key=lambda token: (-max(row[token], 0.0), token))
    kept = order[:k] if 0 < k < len(row) else order
    mass = {token: max(row[token], 0.0) for token in kept}
    total = sum(mass.values())
    mass = {token: value / total for token, value in mass.items()}
    loose = set(kept)
    if p <= 0.0:
        kept, loose = [order[0]], {order[0]}
    elif p < 1.0:
        ahead, loose = 0.0, set()
        nucleus: list[int] = []
        for token in order:
            value = mass.get(token, 0.0)
            if ahead <= p or not nucleus:
                nucleus.append(token)
            if ahead <= p + judges.TOP_P_SLACK and value > 0:
                loose.add(token)
            ahead += value
        kept = nucleus
    total = sum(mass.get(token, 0.0) for token in kept)
    return [mass.get(token, 0.0) / total if token in kept else 0.0 for token in range(len(row))], loose | set(kept)


def test_the_expected_distribution_filters_every_row_as_the_contract_states() -> None:
    """Rows with ties, ``k`` of 0, 1, inside and past the vocabulary, ``p`` of 0, inside and 1: the judge's
    filtering of every row at once is the contract's, row by row."""
    rows = torch.tensor(
        [
            [0.1, 0.3, 0.1, 0.2, 0.3, 0.0, 0.0, 0.0],
            [0.125] * 8,
            [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.03125, 0.0, 0.0],
            [0.05, 0.05, 0.4, 0.05, 0.05, 0.3, 0.05, 0.05],
        ],
        dtype=torch.float32,
    )
    for k_values in ([0, 1, 3, 9], [2, 2, 2, 2], None):
        for p_values in ([0.0, 0.5, 0.7, 1.0], [0.35, 0.9, 0.2, 0.55], None):  # no p at a cumulative mass
            top_k = None if k_values is None else torch.tensor(k_values, dtype=torch.int32)
            top_p = None if p_values is None else torch.tensor(p_values, dtype=torch.float64)
            got, support = judges.expected_distribution(rows, top_k, top_p)
            for i in range(rows.shape[0]):
                k = 0 if k_values is None else k_values[i]
                p = 1.0 if p_values is None else p_values[i]
                want, want_support = _filtered_row(rows[i].double().tolist(), k, p)
                assert got[i].tolist() == pytest.approx(want, abs=1e-12), (k_values, p_values, i)
                assert set(torch.nonzero(support[i]).reshape(-1).tolist()) == want_support, (k_values, p_values, i)


def test_an_input_s_expectation_is_made_once_and_never_for_other_tensors() -> None:
    """The parent judges a run's hundred trials and every audited call on the same inputs: their expectation
    is made once; tensors that are not the very ones asked about (a copy, other values) get their own."""
    probs = probability_rows((2, 300), torch.float32, 5)
    top_k = torch.tensor([20, 50], dtype=torch.int32)
    first = judges.expected(probs, top_k)
    assert judges.expected(probs, top_k) is first
    copy = judges.expected(probs.clone(), top_k)
    assert copy is not first
    assert torch.equal(copy.distribution, first.distribution)
    other = judges.expected(probability_rows((2, 300), torch.float32, 6), top_k)
    assert not torch.equal(other.distribution, first.distribution)
    samples = [torch.multinomial(first.distribution, 1).reshape(-1) for _ in range(100)]
    assert judges.judge_distribution({"probs": probs, "top_k": top_k}, samples, limit=0.2).status == "passed"


# --------------------------------------------------------------------------- indices


def _topk_case() -> tuple[Any, Any]:
    scores = torch.randn((4, 4096), generator=torch.Generator().manual_seed(3))
    return scores, torch.topk(scores, 8, dim=-1).indices


def _judge(got: Any, want: Any, tolerance: correctness.Tolerance) -> str:
    return correctness.compare_output("indices", got, want, shape=(4, 8), dtype="int64", tolerance=tolerance).status


def test_index_judges_catch_what_closeness_passes_and_pass_what_it_fails() -> None:
    scores, want = _topk_case()
    default = correctness.Tolerance()
    as_set = correctness.Tolerance(judge=judges.INDEX_SET)
    in_order = correctness.Tolerance(judge=judges.INDEX_SEQUENCE)
    neighbour = _module("judge_topk_neighbour").run(scores)
    assert _judge(neighbour, want, default) == "passed"  # within rtol: the default comparison is fooled
    assert _judge(neighbour, want, as_set) == "incorrect_numerical"
    assert _judge(neighbour, want, in_order) == "incorrect_numerical"
    reordered = want.sort(dim=-1).values  # honest where order carries nothing
    assert _judge(reordered, want, default) == "incorrect_numerical"
    assert _judge(reordered, want, as_set) == "passed"
    wrong_order = _module("judge_topk_wrong_order").run(scores)
    assert _judge(wrong_order, want, as_set) == "passed"
    assert _judge(wrong_order, want, in_order) == "incorrect_numerical"
    assert _judge(want.clone(), want, in_order) == "passed"
    padded_want = torch.where(torch.arange(8) < 6, want, torch.full_like(want, -1))
    assert _judge(padded_want.flip(-1), padded_want, as_set) == "passed"  # -1 padding anywhere in a row
    assert _judge(torch.full_like(want, -1), padded_want, as_set) == "incorrect_numerical"
    repeated = want.clone()
    repeated[:, 1] = repeated[:, 0]
    assert _judge(repeated, want, as_set) == "incorrect_numerical"


# --------------------------------------------------------------------------- low-bit matched ratio


def test_the_catalogues_definitions_get_their_familys_judge() -> None:
    """No imported definition states a contract: the family's applies, and a run names it."""
    low_bit = next(s for s in definitions_of("moe") if s.name.startswith("trtllm_fp8_per_tensor"))
    sampler = next(s for s in definitions_of("sampling"))
    indexer = next(s for s in definitions_of("dsa-paged") if "block_table" in s.inputs)
    for spec, judge, ratio in (
        (low_bit, judges.ALLCLOSE, 0.95),
        (sampler, judges.DISTRIBUTION, 1.0),
        (indexer, judges.INDEX_SET, judges.INDEXER_MATCHED_RATIO),
    ):
        workload = small_workload(spec, [])
        found = tolerance_for(workload, BenchOptions(), spec)
        assert (found.judge, found.required_matched_ratio) == (judge, ratio), spec.name
    assert "distribution" in tolerance_for(small_workload(sampler, []), BenchOptions(), sampler).comparator


def test_the_low_bit_matched_ratio_catches_fp8_maths_wrong_on_a_tenth() -> None:
    generator = torch.Generator().manual_seed(5)
    x = torch.randn((16, 64), generator=generator).to(torch.float8_e4m3fn)
    w = torch.randn((32, 64), generator=generator).to(torch.float8_e4m3fn)
    scale = torch.tensor([0.5])
    want = ((x.float() @ w.float().T) * scale).to(torch.bfloat16)
    got = _module("judge_lowbit_wrong_tenth").run(x, w, scale)
    contract = correctness.Tolerance(required_matched_ratio=judges.LOW_BIT_MATCHED_RATIO)
    found = correctness.compare_output("output", got, want, shape=(16, 32), dtype="bfloat16", tolerance=contract)
    assert found.status == "incorrect_numerical"
    assert found.matched_ratio is not None
    assert 0.85 < found.matched_ratio < 0.95
    near = want.float()
    near.reshape(-1)[::40] += 1.0  # an honest low-bit kernel: a few elements off
    honest = correctness.compare_output(
        "output", near.to(torch.bfloat16), want, shape=(16, 32), dtype="bfloat16", tolerance=contract
    )
    assert honest.status == "passed"
    strict = correctness.compare_output(
        "output", near.to(torch.bfloat16), want, shape=(16, 32), dtype="bfloat16", tolerance=correctness.Tolerance()
    )
    assert strict.status == "incorrect_numerical"  # what the default would have said


# --------------------------------------------------------------------------- whole sessions on the CPU

SAMPLER = """import torch


@torch.no_grad()
def run(probs, top_k):
    out = []
    for row, k in zip(probs.double(), top_k.tolist()):
        if 0 < k < row.numel():
            row = torch.where(row >= torch.topk(row, k).values[-1], row, torch.zeros_like(row))
        out.append(torch.multinomial(row / row.sum(), 1))
    return torch.cat(out).to(torch.int64)
"""
TOPK = """import torch


@torch.no_grad()
def run(scores):
    return torch.topk(scores.float(), 8, dim=-1).indices.to(torch.int64)
"""


def _record(definition: dict[str, Any]) -> StoredRecord:
    spec = DefinitionSpec.model_validate_json(json.dumps(definition))
    return new_record(spec, name=spec.name)


def _workload(definition: StoredRecord, axes: dict[str, int], inputs: dict[str, Any]) -> StoredRecord:
    spec = WorkloadSpec.model_validate_json(
        json.dumps({"definition_digest": definition.digest, "axes": axes, "inputs": inputs})
    )
    return new_record(spec, name="w1")


def _statuses(tmp_path: Path, definition: StoredRecord, workload: StoredRecord, impls: list[Path]) -> dict[str, Any]:
    """One session of the honest implementation and the cheats (one round: a distribution judge's trials are that
    round's calls); (status, detail, run) by "honest" and each cheat's module name (judge_...)."""
    registry = copy_bundled(tmp_path / "registry")
    registry.add([definition, workload])
    options = BenchOptions(device="cpu", rounds=1, warmup=0, iterations=3, no_sandbox=bool(UNSANDBOXED))
    report = run_bench(registry, definition.name, [str(path) for path in impls], options)
    assert not report.skipped, report.skipped
    out = {}
    for run in report.runs:  # a cheat's name starts with its module's, judge_...; the honest one's does not
        assert run.run is not None
        cheat = next((path.stem for path in impls if run.implementation.startswith(path.stem + "_")), None)
        out[cheat if cheat and cheat.startswith("judge_") else "honest"] = (run.status, run.detail, run.run.model.spec)
    assert set(out) == {"honest", *(path.stem for path in impls if path.stem.startswith("judge_"))}, [
        run.implementation for run in report.runs
    ]
    return out


@pytest.mark.heavy
def test_a_cpu_session_holds_a_sampler_to_the_distribution_test(tmp_path: Path) -> None:
    """The sampling family's contract on a small vocabulary: 100 trials on one input; the reference passes
    and its run names the distribution judge; the argmax sampler is incorrect_numerical, and a sampler honest
    in the trials only is caught by the audit of its timed calls."""
    definition = _record(
        {
            "name": "top_k_sampling_v64",
            "family": "sampling",
            "axes": {"batch_size": {"type": "var"}, "vocab_size": {"type": "const", "value": 64}},
            "inputs": {
                "probs": {"shape": ["batch_size", "vocab_size"], "dtype": "float32"},
                "top_k": {"shape": ["batch_size"], "dtype": "int32"},
            },
            "outputs": {"samples": {"shape": ["batch_size"], "dtype": "int64"}},
            "reference": SAMPLER,
        }
    )
    workload = _workload(definition, {"batch_size": 4}, {"probs": {"type": "random"}, "top_k": {"type": "synthesized"}})
    honest = tmp_path / "sampler_reference.py"
    honest.write_text(SAMPLER)
    cheats = [JUDGES / "judge_sampling_argmax.py", JUDGES / "judge_sampling_honest_then_least.py"]
    found = _statuses(tmp_path, definition, workload, [honest, *cheats])  # one session, its own worker each
    status, detail, run = found["honest"]
    assert status == "passed", detail
    assert run.correctness.comparator.startswith("distribution")
    assert run.integrity["outputsFresh"].result == "skipped"
    assert run.integrity["timedOutputsCorrect"].result == "passed"
    status, detail, _ = found["judge_sampling_argmax"]
    assert status == "incorrect_numerical", detail
    assert "total variation" in detail
    status, detail, _ = found["judge_sampling_honest_then_least"]
    assert status == "reward_hack", detail
    assert "timedOutputsCorrect" in detail
    assert "outside the filtered distribution" in detail


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("judge", "honest", "cheat"),
    [
        (judges.INDEX_SET, "TOPK_SORTED", "judge_topk_neighbour"),
        (judges.INDEX_SEQUENCE, "TOPK", "judge_topk_wrong_order"),
    ],
)
def test_a_cpu_session_holds_indices_to_the_contracts_judge(
    tmp_path: Path, judge: str, honest: str, cheat: str
) -> None:
    """A definition whose contract names an index judge: the honest implementation passes (for index-set, one
    that returns the indices in another order), the cheat is incorrect_numerical."""
    definition = _record(
        {
            "name": f"topk8_{judge.replace('-', '_')}",
            "family": "topk",
            "axes": {
                "rows": {"type": "var"},
                "n": {"type": "const", "value": 4096},
                "k": {"type": "const", "value": 8},
            },
            "inputs": {"scores": {"shape": ["rows", "n"], "dtype": "float32"}},
            "outputs": {"indices": {"shape": ["rows", "k"], "dtype": "int64"}},
            "reference": TOPK,
            "tolerance": {"judge": judge},
        }
    )
    workload = _workload(definition, {"rows": 4}, {"scores": {"type": "random"}})
    source = TOPK if honest == "TOPK" else TOPK.replace(".indices.to(", ".indices.sort(dim=-1).values.to(")
    path = tmp_path / "topk_honest.py"
    path.write_text(source)
    found = _statuses(tmp_path, definition, workload, [path, JUDGES / f"{cheat}.py"])
    status, detail, run = found["honest"]
    assert status == "passed", detail
    assert run.correctness.comparator.startswith(judge)
    status, detail, _ = found[cheat]
    assert status == "incorrect_numerical", detail


def test_the_indexers_contract_lets_a_boundary_swap_pass_and_not_other_indices() -> None:
    """topk 2048 of 8192 scores: one index at the boundary swapped for the next-best (an FP8 kernel's
    rounding) passes 0.99; the right indices moved to their neighbours do not."""
    scores = torch.randn((2, 8192), generator=torch.Generator().manual_seed(9))
    ranked = torch.topk(scores, 2049, dim=-1).indices
    want = ranked[:, :2048]
    swapped = want.clone()
    swapped[0, -1] = ranked[0, 2048]
    contract = correctness.Tolerance(judge=judges.INDEX_SET, required_matched_ratio=judges.INDEXER_MATCHED_RATIO)

    def status(got: Any) -> str:
        found = correctness.compare_output("i", got, want, shape=(2, 2048), dtype="int64", tolerance=contract)
        return found.status

    assert status(swapped.flip(-1)) == "passed"
    assert status(torch.where(want >= 100, want - 1, want)) == "incorrect_numerical"
