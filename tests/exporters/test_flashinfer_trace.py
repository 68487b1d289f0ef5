"""``kictl export flashinfer-trace``: only ranked, verified winners of one GPU, read by FlashInfer-Bench 0.1.2.

FlashInfer-Bench (installed ``--no-deps`` in the test environment: its data
models and apply table import and run on the CPU without flashinfer-python
and apache-tvm-ffi) reads the export with its own loader and builds its own
apply table from it; the table must pick the leaderboard's #1 everywhere.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from kictl.errors import RecordError
from kictl.exporters.flashinfer_trace import (
    NothingToExport,
    definition_document,
    export_flashinfer_trace,
    no_advisories,
    solution_document,
    workload_inputs,
)
from kictl.exporters.selection import ExportReport, refusal, select_winners
from kictl.index.query import QueryIndex
from kictl.rank import workload_leaderboard
from kictl.records import WorkloadSpec, record_from_value
from kictl.store.registry import Registry
from tests.conftest import REPO_ROOT, RunCli
from tests.exporters.conftest import Signed


def _files(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()
    }


def _leaders(signed: Signed, definition: str, workloads: list[str]) -> dict[str, str]:
    """workload name -> the implementation the verified H200 leaderboard ranks first."""
    registry = signed.registry
    leaders = {}
    with QueryIndex.open(registry) as index:
        for workload in workloads:
            board = workload_leaderboard(
                index, definition, workload, policy=registry.policy(), gpu="H200", min_evidence="verified"
            )
            (group,) = board.groups
            leaders[workload] = group.rows[0].implementation_label
    return leaders


@pytest.fixture
def fib_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "fib-cache"))
    monkeypatch.setenv("FIB_DATASET_PATH", str(tmp_path / "fib-dataset"))


def test_flashinfer_bench_loads_the_export_and_apply_picks_the_leaderboard_first(
    signed: Signed, tmp_path: Path, fib_cache: None
) -> None:
    data = pytest.importorskip("flashinfer_bench.data")
    apply_table = pytest.importorskip("flashinfer_bench.apply.table")
    apply_config = pytest.importorskip("flashinfer_bench.apply.config")
    out = tmp_path / "export"
    report = export_flashinfer_trace(signed.registry, out, gpu="H200")
    trace_set = data.TraceSet.from_path(str(out))
    assert sorted(trace_set.definitions) == ["gemm_n64_k64", "gemm_n64_k64_other"]
    traces = trace_set.traces["gemm_n64_k64"]
    assert len(traces) == 3 == len(trace_set.workloads["gemm_n64_k64"])
    assert len(report.exported) == 4
    # its apply table, built by its own code from the export, picks the leaderboard's #1 for every workload
    config = apply_config.ApplyConfigRegistry(default=apply_config.ApplyConfig(max_atol=1.0, max_rtol=1.0, aot_ratio=0))
    table = apply_table.ApplyTable.load_or_build(trace_set, config)
    chosen = {dict(key.axes)["M"]: name for key, name in table.index["gemm_n64_k64"].items()}
    leaders = _leaders(signed, "gemm_n64_k64", ["m2", "m4", "m8"])
    assert leaders == {"m2": "tiled", "m4": "tiled", "m8": "plain"}
    assert chosen == {2: leaders["m2"], 4: leaders["m4"], 8: leaders["m8"]}
    # each trace cites its run: digest and permalink
    exported = {item.run for item in report.exported}
    for trace in traces:
        run = trace.evaluation.log.split()[2].rstrip(";")
        assert run in exported
        assert f"https://kernelindex.dev/r/{run}" in trace.evaluation.log
    # the reported-only faster runs (hasty on m2, tiled on m8) and the B200 run are nowhere in the export
    everything = b"".join(_files(out).values())
    for key in ("hasty/m2", "tiled/m8", "tiled/m2@B200"):
        digest = signed.runs[key].digest
        assert digest.encode() not in everything.replace(b'"run": "' + digest.encode(), b"")
        assert digest not in {trace.evaluation.log.split()[2].rstrip(";") for trace in traces}
    left = {item.run: item.reason for item in report.left_out}
    assert left[signed.runs["hasty/m2"].digest] == "evidence reported is below verified"
    assert left[signed.runs["tiled/m8"].digest] == "evidence reported is below verified"
    assert signed.runs["tiled/m2@B200"].digest not in left  # another GPU is not considered at all
    assert "hasty" not in {solution.name for solutions in trace_set.solutions.values() for solution in solutions}


def test_the_same_registry_gives_the_same_bytes(signed: Signed, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    export_flashinfer_trace(signed.registry, first, gpu="H200")
    export_flashinfer_trace(signed.registry, second, gpu="h200")
    assert _files(first) == _files(second)
    manifest = json.loads((first / "kernelindex.json").read_bytes())
    assert manifest["selection"] == {
        "gpu": "H200", "minimumEvidence": "verified", "requireGeneralizes": False, "definitions": [],
    }  # fmt: skip


def test_a_hostile_name_never_becomes_a_path(signed: Signed, tmp_path: Path) -> None:
    out = tmp_path / "export"
    export_flashinfer_trace(signed.registry, out, gpu="H200", definitions=["gemm_n64_k64_other"])
    escape = signed.records["../../escape"]
    paths = sorted(_files(out))
    assert f"solutions/gemm/gemm_n64_k64_other/{escape.digest.removeprefix('sha256:')}.json" in paths
    assert all(".." not in path for path in paths)
    assert not list(tmp_path.glob("*escape*"))
    assert not list(out.parent.parent.glob("escape*"))
    solution = json.loads((out / "solutions/gemm/gemm_n64_k64_other" / f"{escape.digest[7:]}.json").read_bytes())
    assert solution["name"] == "../../escape"


def test_advised_and_non_generalizing_winners_give_way(signed: Signed, tmp_path: Path) -> None:
    tiled = signed.runs["tiled/m2"].digest
    report = export_flashinfer_trace(
        signed.registry,
        tmp_path / "advised",
        gpu="H200",
        definitions=["gemm_n64_k64"],
        advised=lambda run: run == tiled,
    )
    winners = {item.workload: item.implementation for item in report.exported}
    assert winners == {"m2": "plain", "m4": "tiled", "m8": "plain"}
    assert {item.run: item.reason for item in report.left_out}[tiled] == "named by an open harness advisory"
    passing = {signed.runs["plain/m8"].digest}
    report = export_flashinfer_trace(
        signed.registry,
        tmp_path / "general",
        gpu="H200",
        definitions=["gemm_n64_k64"],
        require_generalizes=True,
        generalizes=passing.__contains__,
    )
    assert [item.run for item in report.exported] == [signed.runs["plain/m8"].digest]
    reasons = {item.run: item.reason for item in report.left_out}
    assert "held-out shapes" in reasons[signed.runs["tiled/m4"].digest]
    assert "held-out shapes" in reasons[signed.runs["plain/m4"].digest]  # the next row must generalize too


def test_a_row_the_leaderboard_marks_with_an_advisory_is_never_exported(signed: Signed) -> None:
    """The leaderboard's rows carry the open advisories that mark them (kictl.advisories): the export refuses those
    rows whatever ``advised`` says, so a marked #1 under the policy's ``rank`` mode cannot reach a serving engine."""
    with QueryIndex.open(signed.registry) as index:
        board = workload_leaderboard(
            index, "gemm_n64_k64", "m2", policy=signed.registry.policy(), gpu="H200", min_evidence="verified"
        )
    (group,) = board.groups
    row = group.rows[0]
    assert refusal(row, advised=no_advisories, generalizes=None) is None
    marked = dataclasses.replace(row, advisories=("KI-2026-0001",))
    assert refusal(marked, advised=no_advisories, generalizes=None) == (
        "named by an open harness advisory (KI-2026-0001)"
    )


def test_nothing_qualifies_refuses_in_one_line_and_writes_nothing(signed: Signed, tmp_path: Path, cli: RunCli) -> None:
    out = tmp_path / "export"
    result = cli("export", "flashinfer-trace", out, "--gpu", "H100", "--registry", signed.registry.root)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: nothing to export: no run on H100 SXM qualifies at evidence verified")
    assert result.stderr.count("\n") == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(NothingToExport, match="held-out shapes"):
        export_flashinfer_trace(signed.registry, out, gpu="H200", require_generalizes=True, generalizes=lambda _: False)
    assert list(tmp_path.iterdir()) == []


def test_cli_writes_and_refuses_an_existing_folder(signed: Signed, tmp_path: Path, cli: RunCli) -> None:
    out = tmp_path / "export"
    result = cli("export", "flashinfer-trace", out, "--gpu", "H200", "--registry", signed.registry.root, "--json")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    assert len(document["exported"]) == 4
    assert "kernelindex.json" in document["files"]
    again = cli("export", "flashinfer-trace", out, "--gpu", "H200", "--registry", signed.registry.root)
    assert again.exit_code == 2
    assert "exists" in again.stderr
    bad = cli(
        "export", "flashinfer-trace", tmp_path / "x", "--gpu", "H200", "--evidence", "great",
        "--registry", signed.registry.root,
    )  # fmt: skip
    assert bad.exit_code == 2, bad.output
    unknown = cli(
        "export", "flashinfer-trace", tmp_path / "y", "--gpu", "H200", "--definition", "no_such_definition",
        "--registry", signed.registry.root,
    )  # fmt: skip
    assert unknown.exit_code == 3, unknown.output


def test_require_generalizes_reads_the_verifiers_held_out_verdicts(signed: Signed, tmp_path: Path, cli: RunCli) -> None:
    """`--require-generalizes`: only winners a verifier's rerun found correct on held-out shapes."""
    out = tmp_path / "export"
    result = cli(
        "export", "flashinfer-trace", out, "--gpu", "H200", "--require-generalizes", "--json",
        "--registry", signed.registry.root,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert sorted(item["run"] for item in document["exported"]) == sorted(
        signed.runs[key].digest for key in ("tiled/m4", "escape/m3")
    )
    reasons = {item["run"]: item["reason"] for item in document["leftOut"]}
    assert "held-out shapes" in reasons[signed.runs["plain/m8"].digest]  # its verifier found it fails
    assert "held-out shapes" in reasons[signed.runs["tiled/m2"].digest]  # no held-out verdict at all


def test_leaderboard_and_site_show_the_held_out_verdict(signed: Signed, tmp_path: Path, cli: RunCli) -> None:
    root = signed.registry.root
    shown = cli("leaderboard", "gemm_n64_k64", "--workload", "m8", "--gpu", "H200", "--registry", root)
    assert shown.exit_code == 0, shown.output
    (plain,) = [line for line in shown.stdout.splitlines() if line.split()[1:2] == ["plain"]]
    assert plain.endswith("fails on held-out shapes")
    document = json.loads(
        cli("leaderboard", "gemm_n64_k64", "--workload", "m4", "--gpu", "H200", "--registry", root, "--json").stdout
    )
    verdicts = {row["implementation"]: row["heldOut"] for row in document[0]["rows"]}
    assert verdicts == {"tiled": "generalizes", "plain": None}
    site = tmp_path / "site"
    built = cli("site", "build", site, "--registry", root)
    assert built.exit_code == 0, built.output
    page = (site / "r" / signed.runs["tiled/m4"].digest / "index.html").read_text()
    assert "generalizes" in page


def test_flashinfer_bench_apply_runs_the_exported_winner_on_the_cpu(
    signed: Signed, tmp_path: Path, fib_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FlashInfer-Bench's apply, enabled on the export, substitutes the leaderboard's #1 for each exported shape."""
    fib = pytest.importorskip("flashinfer_bench")
    import torch

    out = tmp_path / "export"
    export_flashinfer_trace(signed.registry, out, gpu="H200", definitions=["gemm_n64_k64"])
    config = fib.ApplyConfigRegistry(default=fib.ApplyConfig(max_atol=1.0, max_rtol=1.0, aot_ratio=0))
    fib.enable_apply(str(out), config)
    fell_back: list[int] = []

    def fallback(a: Any, b: Any) -> Any:
        fell_back.append(a.shape[0])
        return a @ b.T

    try:
        for m, leader in ((2, "tiled"), (4, "tiled"), (8, "plain"), (3, None)):
            a, b = torch.randn(m, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)
            monkeypatch.delenv("KICTL_APPLIED", raising=False)
            c = fib.apply("gemm_n64_k64", args=(a, b), fallback=fallback)
            assert torch.equal(c, a @ b.T)
            if leader is None:
                assert fell_back == [3]  # a shape with no trace: FlashInfer-Bench falls back
            else:
                assert os.environ.get("KICTL_APPLIED") == leader
    finally:
        fib.disable_apply()


def test_what_flashinfer_bench_cannot_hold_is_refused_with_the_reason(signed: Signed) -> None:
    """A source path that leaves the solution's folder, a language or dtype FlashInfer-Bench lacks."""
    tiled = signed.records["tiled"]
    raw = json.loads(json.dumps(tiled.raw))
    raw["spec"]["sources"][0]["path"] = "sub/../../escape.py"
    raw["spec"]["entryPoint"] = "sub/../../escape.py::run"
    with pytest.raises(RecordError, match="leads outside the solution's folder"):
        solution_document(record_from_value(raw), "gemm_n64_k64", kictl_measured=True, hardware="H200")
    raw = json.loads(json.dumps(tiled.raw))
    raw["spec"]["runtime"] = "fortran"
    with pytest.raises(RecordError, match="runtime 'fortran' is none of FlashInfer-Bench's languages"):
        solution_document(record_from_value(raw), "gemm_n64_k64", kictl_measured=True, hardware="H200")
    # a run() that takes the definition's constants as keyword-only parameters (kictl fills them, FlashInfer-Bench
    # calls with the inputs alone): refused; one whose keyword-only parameter has a default is callable there
    raw = json.loads(json.dumps(tiled.raw))
    entry_file, function = raw["spec"]["entryPoint"].split("::")
    sources = raw["spec"]["sources"]
    for keyword, refused in (("*, N", True), ("*, N=64", False)):
        raw["spec"]["sources"] = []
        for item in sources:
            told = item["content"].replace(f"def {function}(A, B)", f"def {function}(A, B, {keyword})")
            assert told != item["content"] or item["path"] != entry_file
            raw["spec"]["sources"].append(
                {**item, "content": told, "sha256": hashlib.sha256(told.encode()).hexdigest()}
            )
        record = record_from_value(raw)
        if refused:
            with pytest.raises(RecordError, match=r"keyword-only parameters \(N\)"):
                solution_document(record, "gemm_n64_k64", kictl_measured=True, hardware="H200")
        else:
            assert solution_document(record, "gemm_n64_k64", kictl_measured=True, hardware="H200")["sources"]
    document = solution_document(tiled, "gemm_n64_k64", kictl_measured=True, hardware="H200")
    assert document["spec"]["destination_passing_style"] is False
    assert (
        "destination_passing_style"
        not in solution_document(tiled, "gemm_n64_k64", kictl_measured=False, hardware="H200")["spec"]
    )
    definition = json.loads(json.dumps(signed.records["gemm_n64_k64"].raw))
    definition["spec"]["inputs"]["A"]["dtype"] = "float64"
    with pytest.raises(RecordError, match=r"inputs\.A is float64"):
        definition_document(record_from_value(definition))


def test_the_selection_is_public_and_is_what_the_export_holds(signed: Signed, tmp_path: Path) -> None:
    """A second format starts from ``kictl.exporters.selection``: the same winners, the same reasons."""
    out = tmp_path / "export"
    written = export_flashinfer_trace(signed.registry, out, gpu="H200")
    report = ExportReport(out=out, gpu="H200", min_evidence="verified", require_generalizes=False, definitions=())
    with QueryIndex.open(signed.registry) as index:
        chosen = select_winners(index, signed.registry, report)
    assert sorted(candidate.row.run.digest for candidate in chosen) == sorted(item.run for item in written.exported)
    assert {item.run: item.reason for item in report.left_out} == {item.run: item.reason for item in written.left_out}
    assert all(candidate.row.rank == 1 for candidate in chosen)


def test_flashinfer_bench_calls_the_exported_reference_with_its_inputs_in_order(
    tmp_path: Path, fib_cache: None
) -> None:
    """FlashInfer-Bench makes a workload's inputs in the definition's order and calls ``run(*inputs)`` with them
    (``gen_inputs``, ``DefaultEvaluator.build_baseline``): the exported definition lists its inputs and outputs in
    the reference's order, not the record's sorted one (in which the paged-attention reference got ``k_cache``
    for ``q`` and failed its first assert, which FlashInfer-Bench's harness logs as an empty message).  Its own
    reference step, replayed on the CPU on a bundled definition and workload exported as suite_speed.py does."""
    pytest.importorskip("flashinfer_bench")
    torch = pytest.importorskip("torch")
    from flashinfer_bench.bench.evaluators.utils import normalize_result
    from flashinfer_bench.bench.utils import gen_inputs, load_safetensors
    from flashinfer_bench.compile import BuilderRegistry
    from flashinfer_bench.data import TraceSet

    registry = Registry(REPO_ROOT)
    name = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
    definition = registry.resolve(name, ["Definition"])
    (workload,) = [
        record
        for record in registry.iter_records(["Workload"])
        if isinstance(record.model.spec, WorkloadSpec)
        and record.model.spec.definition_digest == definition.digest
        and record.name == "b4x_q64_kv256"
    ]
    assert isinstance(workload.model.spec, WorkloadSpec)
    inputs, files = workload_inputs(registry, definition, workload, f"blob/workloads/gqa_paged/{name}")
    line = {"uuid": "b4x", "axes": dict(workload.model.spec.axes), "inputs": inputs}
    files[f"definitions/gqa_paged/{name}.json"] = json.dumps(definition_document(definition)).encode()
    files[f"workloads/gqa_paged/{name}.jsonl"] = json.dumps(
        {"definition": name, "workload": line, "solution": None, "evaluation": None}
    ).encode()
    out = tmp_path / "fib"
    for relative, data in files.items():
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        (out / relative).write_bytes(data)
    trace_set = TraceSet.from_path(str(out))
    fib_definition = trace_set.definitions[name]
    (trace,) = trace_set.workloads[name]
    assert list(fib_definition.inputs) == "q k_cache v_cache qo_indptr kv_indptr kv_indices sm_scale".split()
    assert list(fib_definition.outputs) == ["output", "lse"]  # the order run() returns them in
    reference = BuilderRegistry.get_instance().build_reference(fib_definition)
    tensors = load_safetensors(fib_definition, trace.workload, trace_set.root)
    args = gen_inputs(fib_definition, trace.workload, device="cpu", safe_tensors=tensors)
    outputs = normalize_result(fib_definition, reference(*args), "cpu")
    assert [(tuple(item.shape), item.dtype) for item in outputs] == [
        ((256, 24, 128), torch.bfloat16),
        ((256, 24), torch.float32),
    ]
    assert [item.dtype for item in outputs] == fib_definition.torch_output_dtypes


def test_every_bundled_definition_is_exported_in_its_references_order() -> None:
    """Over half the bundled definitions' references take their inputs in an order other than the sorted one."""
    registry = Registry(REPO_ROOT)
    unsorted = 0
    for record in registry.iter_records(["Definition"]):
        document = definition_document(record)
        run = next(node for node in ast.parse(document["reference"]).body if getattr(node, "name", "") == "run")
        assert isinstance(run, ast.FunctionDef)
        assert list(document["inputs"]) == [arg.arg for arg in (*run.args.posonlyargs, *run.args.args)], record.name
        unsorted += list(document["inputs"]) != sorted(document["inputs"])
    assert unsorted > 0
