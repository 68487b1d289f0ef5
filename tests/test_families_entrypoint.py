"""Inputs made by a function the definition names (``inputs_entrypoint``, issue 42), in kictl's reference worker.

A definition whose inputs need a structure no family knows names a function of its reference module; a
workload marks those inputs ``generated``.  The bench calls the function in kictl's reference worker, with a
seed and the axes, and hands its tensors to every worker as a blob: the implementation gets them, never the
function.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kictl.bench.judge.inputs import ENTRYPOINT, materialize_one, plan_inputs, resolve_entrypoint
from kictl.bench.judge.session import BenchOptions, run_bench
from kictl.definitions import check_workload
from kictl.errors import RecordError
from kictl.records import DefinitionSpec, StoredRecord, WorkloadSpec, new_record
from tests.bench.conftest import UNSANDBOXED
from tests.conftest import copy_bundled

REFERENCE = '''import os

import torch


def run(x, tag):
    return x.amax(-1)


def make_inputs(seed, rows, cols, one):
    """Rows of a distribution (they sum to one), and a token this process keeps in its environment."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand((rows, cols), generator=generator, dtype=torch.float64) + 0.01
    token = int.from_bytes(os.urandom(7), "big")
    os.environ["ROW_SUMS_TOKEN"] = str(token)
    return {"x": (x / x.sum(-1, keepdim=True)).float(), "tag": torch.tensor([token], dtype=torch.int64)}
'''
#: Right only on inputs the entrypoint made, and only where it did not run in this process.
IMPLEMENTATION = """import os

import torch


def run(x, tag):
    total = x.sum(-1)
    made_here = os.environ.get("ROW_SUMS_TOKEN") == str(int(tag[0]))
    distribution = bool(torch.allclose(total, torch.ones_like(total), atol=1e-5))
    return x.amax(-1) if distribution and not made_here else x.amax(-1) + 1
"""


def _definition(entrypoint: str | None = "make_inputs") -> StoredRecord:
    spec = DefinitionSpec.model_validate_json(
        json.dumps(
            {
                "name": "row_sums_generated",
                "family": "row-sums",
                "axes": {
                    "rows": {"type": "var"},
                    "cols": {"type": "const", "value": 16},
                    "one": {"type": "const", "value": 1},
                },
                "inputs": {
                    "x": {"shape": ["rows", "cols"], "dtype": "float32"},
                    "tag": {"shape": ["one"], "dtype": "int64"},
                },
                "outputs": {"y": {"shape": ["rows"], "dtype": "float32"}},
                "reference": REFERENCE,
                "inputs_entrypoint": entrypoint,
            }
        )
    )
    return new_record(spec, name=spec.name)


def _workload(definition: StoredRecord) -> StoredRecord:
    spec = WorkloadSpec.model_validate_json(
        json.dumps(
            {
                "definition_digest": definition.digest,
                "axes": {"rows": 3},
                "inputs": {"x": {"type": "generated", "seed": 5}, "tag": {"type": "generated", "seed": 5}},
            }
        )
    )
    return new_record(spec, name="rows3")


def test_a_generated_input_needs_the_definitions_entrypoint() -> None:
    plain = _definition(None)
    workload = _workload(plain)
    spec, model = plain.model.spec, workload.model.spec
    assert isinstance(spec, DefinitionSpec)
    assert isinstance(model, WorkloadSpec)
    with pytest.raises(RecordError, match="names no inputs_entrypoint"):
        check_workload(spec, model, source="rows3")
    with pytest.raises(RecordError, match="names no inputs_entrypoint"):
        plan_inputs(spec, workload, ("x", "tag"), None)
    with pytest.raises(ValueError, match="inputs_entrypoint"):
        _definition("not a name()")


def test_entrypoint_tensors_become_a_blob_of_the_definitions_dtypes_and_shapes() -> None:
    definition = _definition()
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    plan = plan_inputs(spec, _workload(definition), ("x", "tag"), None, offset=1)
    assert [source.kind for source in plan.sources] == [ENTRYPOINT, ENTRYPOINT]
    calls: list[tuple[tuple[str, ...], dict[str, int], int]] = []

    def generate(
        names: tuple[str, ...], axes: dict[str, int], seed: int
    ) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
        calls.append((names, axes, seed))
        x = torch.full((3, 16), 1 / 16)
        return {"x": ("float32", (3, 16), x.numpy().tobytes()), "tag": ("int64", (1,), b"\x07" + b"\x00" * 7)}

    made = resolve_entrypoint(plan, {"rows": 3, "cols": 16, "one": 1}, generate)
    assert calls == [(("x", "tag"), {"rows": 3, "cols": 16, "one": 1}, plan.sources[0].seed)]
    assert [source.kind for source in made.sources] == ["blob", "blob"]
    assert torch.equal(materialize_one(made.sources[0], "cpu"), torch.full((3, 16), 1 / 16))
    assert materialize_one(made.sources[1], "cpu").tolist() == [7]

    def wrong(names: tuple[str, ...], axes: dict[str, int], seed: int) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
        return {"x": ("float64", (3, 16), bytes(3 * 16 * 8)), "tag": ("int64", (1,), bytes(8))}

    with pytest.raises(RecordError, match="made x as float64"):
        resolve_entrypoint(plan, {"rows": 3, "cols": 16, "one": 1}, wrong)


@pytest.mark.heavy
def test_the_bench_makes_generated_inputs_in_its_reference_worker(tmp_path: Path) -> None:
    """A CPU session: the implementation passes only when its inputs are the entrypoint's distributions and
    were made in another process than its own; an implementation that is the reference passes too."""
    registry = copy_bundled(tmp_path / "registry")
    definition = _definition()
    registry.add([definition, _workload(definition)])
    impl = tmp_path / "row_sums.py"
    impl.write_text(IMPLEMENTATION)
    report = run_bench(
        registry,
        "row_sums_generated",
        [str(impl)],
        BenchOptions(device="cpu", rounds=2, warmup=0, iterations=3, no_sandbox=bool(UNSANDBOXED)),
    )
    assert not report.skipped, report.skipped
    statuses = {run.implementation: (run.status, run.detail) for run in report.runs}
    assert all(status == "passed" for status, _ in statuses.values()), statuses
