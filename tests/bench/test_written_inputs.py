"""Inputs the definition's reference writes (docs/bench.md, "Inputs the reference writes"): judged as outputs.

FlashInfer Trace's GDN MTP definitions give their reference an ``intermediate_states_buffer`` input that it fills.
kictl learns such an input from the reference's own calls, judges the workload again with it named, compares it
after every correctness call and every audited timed call (read back by the parent where it staged it), and
keeps ``inputsUnchanged`` for every other input. Real CPU sessions, real worker processes, sandboxed where
bubblewrap is there.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kictl.bench import wire
from kictl.bench.judge import energy_loop
from kictl.bench.judge.session import BenchOptions, BenchReport, run_bench
from kictl.records import DefinitionSpec, StoredRecord, WorkloadSpec, new_record
from kictl.store.registry import Registry
from tests.bench.conftest import UNSANDBOXED, cuda_available
from tests.conftest import REPO_ROOT, copy_bundled

#: y = 2x, and the first half of each row of ``buf`` set to x + 1: the rest of ``buf`` is left as the caller gave it
REFERENCE = """import torch


def run(x, buf):
    buf[:, :4] = x[:, :4] + 1.0
    return x * 2.0


def make_inputs(seed, rows, cols):
    generator = torch.Generator().manual_seed(seed)
    return {name: torch.randn((rows, cols), generator=generator) for name in ("x", "buf")}
"""

#: Each implementation's code, and the status and failed checks its run must get.
IMPLEMENTATIONS = {
    # does what the reference does
    "honest": ("buf[:, :4] = x[:, :4] + 1.0\n    return x * 2.0", "passed", ()),
    # the outputs right, the written input never written
    "never_writes": ("return x * 2.0", "incorrect_numerical", ()),
    # all of buf written: the half the reference leaves as given is wrong
    "writes_all": ("buf.copy_(x + 1.0)\n    return x * 2.0", "incorrect_numerical", ()),
    # writes it in the correctness rounds (the first two calls) and never when timed: the parent's read-back of
    # the audited calls finds it
    "untimed": (
        "CALLS[0] += 1\n    if CALLS[0] <= 2:\n        buf[:, :4] = x[:, :4] + 1.0\n    return x * 2.0",
        "reward_hack",
        ("timedOutputsCorrect",),
    ),
    # writes the written input as it should, and another input too: inputsUnchanged still holds for it
    "writes_x": (
        "buf[:, :4] = x[:, :4] + 1.0\n    y = x * 2.0\n    x[0, 0] = 7.0\n    return y",
        "reward_hack",
        ("inputsUnchanged",),
    ),
}


def _definition() -> StoredRecord:
    spec = DefinitionSpec.model_validate_json(
        json.dumps(
            {
                "name": "doubled_with_buffer",
                "family": "doubled-with-buffer",
                "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 8}},
                "inputs": {
                    "x": {"shape": ["rows", "cols"], "dtype": "float32"},
                    "buf": {"shape": ["rows", "cols"], "dtype": "float32"},
                },
                "outputs": {"y": {"shape": ["rows", "cols"], "dtype": "float32"}},
                "reference": REFERENCE,
                "inputs_entrypoint": "make_inputs",
            }
        )
    )
    return new_record(spec, name=spec.name)


def _workload(definition: StoredRecord, name: str, kind: str) -> StoredRecord:
    spec = WorkloadSpec.model_validate_json(
        json.dumps(
            {
                "definition_digest": definition.digest,
                "axes": {"rows": 16},
                "inputs": {"x": {"type": kind, "seed": 3}, "buf": {"type": kind, "seed": 4}},
            }
        )
    )
    return new_record(spec, name=name)


#: The CPU always; a GPU where there is one (the parent reads the written input back through CUDA IPC there).
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")]),
]


def _session(root: Path, device: str, names: list[str], workloads: tuple[str, ...], **options: Any) -> BenchReport:
    registry = copy_bundled(root / "registry")
    definition = _definition()
    registry.add(
        [
            definition,
            _workload(definition, "random_buffer", "random"),
            _workload(definition, "generated_buffer", "generated"),
        ]
    )
    impls = []
    for name in names:
        path = root / f"{name}.py"
        path.write_text(f"CALLS = [0]\n\n\ndef run(x, buf):\n    {IMPLEMENTATIONS[name][0]}\n")
        impls.append(str(path))
    return run_bench(
        registry,
        "doubled_with_buffer",
        impls,
        BenchOptions(
            device=device,
            workloads=workloads,
            rounds=2,
            warmup=0,
            iterations=12,
            no_sandbox=bool(UNSANDBOXED),
            **options,
        ),
    )


@pytest.fixture(scope="module", params=DEVICES)
def session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> BenchReport:
    root = tmp_path_factory.mktemp("written")
    return _session(root, request.param, list(IMPLEMENTATIONS), ("random_buffer", "generated_buffer"))


def test_a_loose_matched_ratio_forgives_no_skipped_write(tmp_path: Path) -> None:
    """Half of ``buf`` is what the call leaves alone, and matches whether or not the call writes the rest: with
    ``--matched-ratio 0.3`` the outputs are judged at 0.3, but the written input at every element."""
    report = _session(tmp_path, "cpu", ["honest", "never_writes"], ("random_buffer",), matched_ratio=0.3)
    statuses = {run.implementation.rsplit("_", 1)[0]: run.status for run in report.runs}
    assert statuses == {"honest": "passed", "never_writes": "incorrect_numerical"}, statuses


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_a_written_input_is_judged_as_an_output(session: BenchReport, name: str) -> None:
    (run,) = [run for run in session.runs if run.implementation.rsplit("_", 1)[0] == name]
    _, status, checks = IMPLEMENTATIONS[name]
    assert (run.status, run.workload) == (status, "random_buffer"), (run.status, run.detail)
    assert run.run is not None
    integrity = run.run.raw["spec"]["integrity"]
    failed = sorted(key for key, check in integrity.items() if check["result"] == "failed")
    assert failed == sorted(checks), (failed, run.detail)
    if status == "passed":  # the audited timed calls were judged with the written input, read back by the parent
        assert integrity["timedOutputsCorrect"]["result"] == "passed", integrity["timedOutputsCorrect"]


def test_the_session_names_the_written_input_in_the_protocol(session: BenchReport) -> None:
    (protocol,) = [record for record in session.records if record.kind == "BenchmarkProtocol"]
    assert "the definition's reference writes buf:" in protocol.raw["spec"]["measurement"]["inputPolicy"]


def test_a_written_input_kictl_does_not_draw_anew_skips_the_workload(session: BenchReport) -> None:
    """An input the workload makes once for every call (here the definition's entrypoint makes it) would carry one
    call's writes into the next: kictl does not judge it, and says why."""
    assert dict(session.skipped)["generated_buffer"].startswith("the definition's reference writes its input buf")
    assert {run.workload for run in session.runs} == {"random_buffer"}


@pytest.mark.parametrize("device", DEVICES)
def test_the_gdn_mtp_reference_and_torch_implementation_pass(device: str) -> None:
    """The real definition: its own reference, run as an implementation, and ``torch_gdn_mtp`` fill
    ``intermediate_states_buffer`` as the reference worker's copy does, and pass every check."""
    families = REPO_ROOT / "implementations" / "families"
    report = run_bench(
        Registry(REPO_ROOT),
        "gdn_mtp_qk4_v8_d128_k_last",
        [str(families / "reference"), str(families / "gdn" / "torch_gdn_mtp")],
        BenchOptions(device=device, workloads=("b4_t2",), rounds=2, warmup=0, iterations=6),
    )
    assert report.skipped == []
    assert [(run.status, run.detail) for run in report.runs] == [("passed", None)] * 2
    (protocol,) = [record for record in report.records if record.kind == "BenchmarkProtocol"]
    assert "reference writes intermediate_states_buffer:" in protocol.raw["spec"]["measurement"]["inputPolicy"]


def test_no_energy_is_measured_where_the_reference_writes_an_input() -> None:
    """An energy loop calls back to back on one staging: each call would be given what the last one wrote, which
    the reference's copy never is. The run gets the reason, not a figure (its status is kictl's runtime_error)."""
    phase = energy_loop.EnergyPhase("cpu", counter=object())
    driver = SimpleNamespace(
        evidence=SimpleNamespace(failure=None), armed=True, written=(wire.OutputSpec("buf", (16, 8), "float32"),)
    )
    phase.measure(driver)
    error = phase.evidence[id(driver)].error
    assert error is not None
    assert "writes its input buf" in error
