"""Attacks on the importer through the dataset it reads (issue 13): each test performs one.

A dataset is untrusted input.  Symlinks must not lead the importer outside it;
deep JSON, out-of-range numbers and oversized documents, lines and blobs must
each cost one ``file:line`` error, never the import (no traceback, no abort);
the rest of the dataset is imported and the exit code is 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kictl.importers.flashinfer_bench import Limits, import_flashinfer_bench
from kictl.store.registry import Registry
from kictl.validate import validate_registry
from tests.conftest import RunCli
from tests.importers.conftest import CopyDataset

TRACES = "traces/alice/gemm/gemm_n8_k4.jsonl"
LARGE = 400  # trace lines of the dataset killed mid-import
SECRET = "top-secret-bytes-outside-the-dataset"


def _trace_lines(dataset: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (dataset / TRACES).read_text().splitlines() if line.strip()]


def _append(dataset: Path, *lines: str) -> list[int]:
    """Append raw lines to the traces file; returns their line numbers."""
    path = dataset / TRACES
    text = path.read_text()
    if not text.endswith("\n"):
        text += "\n"
    first = len(text.splitlines()) + 1
    path.write_text(text + "".join(line + "\n" for line in lines))
    return list(range(first, first + len(lines)))


def _with_latency(dataset: Path, latency: str) -> str:
    """A copy of the first trace line with its latency_ms replaced by the literal ``latency``."""
    text = json.dumps(_trace_lines(dataset)[0])
    return text.replace('"latency_ms": 0.0204', f'"latency_ms": {latency}')


def _run_count(registry: Registry) -> int:
    return sum(1 for _ in registry.record_files(["BenchmarkRun"]))


def _all_record_text(registry: Registry) -> str:
    return "".join(path.read_text() for _, path in registry.record_files())


# --------------------------------------------------------------------------- symlinks


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the dataset holding a valid-looking definition, solution and trace lines with a secret."""
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def test_a_symlinked_document_leading_outside_is_skipped_and_never_read(
    empty_registry: Registry, copy_dataset: CopyDataset, outside: Path
) -> None:
    dataset = copy_dataset("current_schema")
    definition = json.loads((dataset / "definitions/gemm/gemm_n8_k4.json").read_text())
    definition["name"] = "gemm_secret"
    definition["description"] = SECRET
    (outside / "secret.json").write_text(json.dumps(definition))
    (dataset / "definitions/gemm/secret.json").symlink_to(outside / "secret.json")
    lines = _trace_lines(dataset)
    (outside / "secret.jsonl").write_text(json.dumps({**lines[0], "definition": "gemm_secret"}) + "\n")
    (dataset / "traces/alice/gemm/secret.jsonl").symlink_to(outside / "secret.jsonl")

    report = import_flashinfer_bench(empty_registry, dataset)

    found = {str(item) for item in report.skipped}
    assert found == {
        "definitions/gemm/secret.json: a symlink that leads outside the dataset; not read",
        "traces/alice/gemm/secret.jsonl: a symlink that leads outside the dataset; not read",
    }
    assert SECRET not in _all_record_text(empty_registry)
    assert _run_count(empty_registry) == 5  # the rest of the dataset is imported


def test_a_symlinked_folder_leading_outside_is_skipped_and_never_read(
    empty_registry: Registry, copy_dataset: CopyDataset, outside: Path
) -> None:
    dataset = copy_dataset("current_schema")
    definition = json.loads((dataset / "definitions/gemm/gemm_n8_k4.json").read_text())
    definition.update(name="gemm_secret", description=SECRET)
    (outside / "defs").mkdir()
    (outside / "defs/secret.json").write_text(json.dumps(definition))
    (dataset / "definitions/elsewhere").symlink_to(outside / "defs", target_is_directory=True)
    # a whole top folder too: the solutions of the dataset live outside it
    (outside / "solutions").mkdir()
    (dataset / "workloads").rename(outside / "workloads")
    (dataset / "workloads").symlink_to(outside / "workloads", target_is_directory=True)

    report = import_flashinfer_bench(empty_registry, dataset)

    assert [str(item) for item in report.skipped] == [
        "definitions/elsewhere: a symlinked folder that leads outside the dataset; not read",
        "workloads: a symlink that leads outside the dataset; not read",
    ]
    assert SECRET not in _all_record_text(empty_registry)
    assert _run_count(empty_registry) == 5  # trace lines carry their own workloads


def test_symlinks_inside_the_dataset_are_followed(empty_registry: Registry, copy_dataset: CopyDataset) -> None:
    dataset = copy_dataset("current_schema")
    moved = dataset / "kept" / "gemm_n8_k4.json"
    moved.parent.mkdir()
    (dataset / "definitions/gemm/gemm_n8_k4.json").rename(moved)
    (dataset / "definitions/gemm/gemm_n8_k4.json").symlink_to(Path("../../kept/gemm_n8_k4.json"))
    report = import_flashinfer_bench(empty_registry, dataset)
    assert report.ok, [str(item) for item in report.skipped]
    assert _run_count(empty_registry) == 5


def test_a_fifo_posing_as_a_document_is_skipped_without_blocking(
    empty_registry: Registry, copy_dataset: CopyDataset
) -> None:
    dataset = copy_dataset("current_schema")
    os.mkfifo(dataset / "definitions/gemm/blocking.json")
    report = import_flashinfer_bench(empty_registry, dataset)
    assert [str(item) for item in report.skipped] == ["definitions/gemm/blocking.json: not a regular file; not read"]


# --------------------------------------------------------------------------- depth and numbers


def test_deep_json_numbers_out_of_range_and_huge_integers_cost_one_line_each(
    empty_registry: Registry, copy_dataset: CopyDataset
) -> None:
    dataset = copy_dataset("current_schema")
    deep = '{"definition": "gemm_n8_k4", "workload": ' + "[" * 900 + "]" * 900 + "}"
    numbers = _append(
        dataset,
        deep,
        _with_latency(dataset, "1e305"),
        _with_latency(dataset, "1" + "0" * 5000),
        _with_latency(dataset, "1e400"),
        _with_latency(dataset, "9007199254.740993"),
    )
    definition = json.loads((dataset / "definitions/gemm/gemm_n8_k4.json").read_text())
    (dataset / "definitions/gemm/deep.json").write_text(
        json.dumps({**definition, "name": "gemm_deep"})[:-1] + ', "x": ' + "[" * 900 + "]" * 900 + "}"
    )

    report = import_flashinfer_bench(empty_registry, dataset)

    messages = {(item.file, item.line): item.message for item in report.skipped}
    assert messages.pop(("definitions/gemm/deep.json", None)) == (
        "not JSON kictl reads: arrays and objects nested deeper than 64 levels"
    )
    assert messages.pop((TRACES, numbers[0])) == (
        "not JSON kictl reads: arrays and objects nested deeper than 64 levels"
    )
    assert messages.pop((TRACES, numbers[1])) == (
        "$.evaluation.performance.latency_ms: 1e+305 is out of range "
        "(latencyNs holds at most 9007199254740991 ns, about 104 days)"
    )
    assert messages.pop((TRACES, numbers[2])) == (
        "not JSON kictl reads: an integer literal of 5001 digits (100000000000…) is out of range"
    )
    assert messages.pop((TRACES, numbers[3])) == "$.evaluation: PASSED without a finite performance.latency_ms"
    assert messages.pop((TRACES, numbers[4])).startswith("$.evaluation.performance.latency_ms: 9007199254.740993")
    assert messages == {}
    assert _run_count(empty_registry) == 5  # the rest is imported
    validation = validate_registry(empty_registry)
    assert validation.ok, [str(problem) for problem in validation.problems]


def test_the_cli_reports_each_bad_line_and_exits_1_without_a_traceback(
    empty_registry: Registry, copy_dataset: CopyDataset
) -> None:
    dataset = copy_dataset("current_schema")
    [deep, huge] = _append(
        dataset,
        '{"definition": "gemm_n8_k4", "workload": {"x": ' + "[" * 900 + "]" * 900 + "}}",
        _with_latency(dataset, "1e305"),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kictl",
            "import",
            "flashinfer-bench",
            str(dataset),
            "--registry",
            str(empty_registry.root),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"skipped: {TRACES}:{deep}: not JSON kictl reads: arrays and objects nested deeper than 64" in done.stderr
    assert f"skipped: {TRACES}:{huge}: $.evaluation.performance.latency_ms: 1e+305 is out of range" in done.stderr
    assert "error: 2 item(s) skipped; the rest was imported" in done.stderr
    assert _run_count(empty_registry) == 5


# --------------------------------------------------------------------------- size caps


def test_an_oversized_line_is_skipped_without_being_held(empty_registry: Registry, copy_dataset: CopyDataset) -> None:
    dataset = copy_dataset("current_schema")
    line = _trace_lines(dataset)[0]
    line["evaluation"]["log"] = "x" * (Limits().line_bytes + 10)
    after = _trace_lines(dataset)[1]
    after["workload"].update(uuid="00000000-0000-4000-8000-000000000099", axes={"M": 99})
    [big, _] = _append(dataset, json.dumps(line), json.dumps(after))
    report = import_flashinfer_bench(empty_registry, dataset)
    assert [str(item) for item in report.skipped] == [
        f"{TRACES}:{big}: the line is over the limit of {Limits().line_bytes} bytes; not read"
    ]
    assert report.counts()["BenchmarkRun"] == {"new": 6, "present": 0, "skipped": 1}  # the line after it is read


def test_documents_and_blobs_over_their_caps_are_skipped(empty_registry: Registry, copy_dataset: CopyDataset) -> None:
    dataset = copy_dataset("current_schema")
    solution = dataset / "solutions/alice/gemm/gemm_n8_k4/triton_tiled.json"
    padded = json.loads(solution.read_text())
    padded["description"] = "x" * 100_000
    solution.write_text(json.dumps(padded))
    limits = Limits(document_bytes=solution.stat().st_size - 1, blob_bytes=100)
    report = import_flashinfer_bench(empty_registry, dataset, limits=limits)
    found = [str(item) for item in report.skipped]
    limit = limits.document_bytes
    assert (
        f"solutions/alice/gemm/gemm_n8_k4/triton_tiled.json: the file is over the limit of {limit} bytes; not read"
        in (found)
    )
    blob = "./blob/workloads/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1/present.safetensors"
    assert any(text.endswith(f"{blob}: the file is over the limit of 100 bytes; not read") for text in found)
    assert not any(empty_registry.blobs_dir.rglob("*"))


# --------------------------------------------------------------------------- kill -9 mid-import


def _large_dataset(root: Path, copy_dataset: CopyDataset, lines: int) -> Path:
    dataset = copy_dataset("current_schema")
    template = _trace_lines(dataset)[0]
    with (dataset / TRACES).open("a") as handle:
        for index in range(lines):
            template["workload"]["uuid"] = f"00000000-0000-4000-8000-{index:012d}"
            template["workload"]["axes"] = {"M": index + 100}
            template["evaluation"]["performance"]["latency_ms"] = 0.01 + index * 1e-6
            handle.write(json.dumps(template) + "\n")
    return dataset


@pytest.mark.slow
def test_kill_9_during_a_large_import_then_a_reimport_leaves_a_valid_registry(
    empty_registry: Registry, copy_dataset: CopyDataset
) -> None:
    dataset = _large_dataset(empty_registry.root.parent, copy_dataset, LARGE)
    runs = empty_registry.records_dir / "BenchmarkRun"
    command = [sys.executable, "-m", "kictl", "import", "flashinfer-bench", str(dataset)]
    process = subprocess.Popen(
        [*command, "--registry", str(empty_registry.root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(6000):  # wait until it is writing runs, then kill it mid-write
            if runs.is_dir() and sum(1 for _ in runs.rglob("*.json")) > 20:
                break
            if process.poll() is not None:
                pytest.fail("the import finished before it could be killed; make the dataset larger")
            subprocess.run(["sleep", "0.01"], check=True)
        process.kill()
    finally:
        process.wait()
    assert process.returncode == -9
    assert 20 < sum(1 for _ in runs.rglob("*.json")) < LARGE + 5
    # what a killed writer can leave: its temporary files (one is made here if the kill left none)
    temporaries = list(empty_registry.root.joinpath("registry").rglob(".*.tmp"))
    if not temporaries:
        shard = next(runs.iterdir())
        planted = shard / f".{'0' * 64}.json.k9x2ab.tmp"
        planted.write_bytes(b'{"apiVersion": "kernelindex.dev/v1al')
        temporaries = [planted]
    for path in temporaries:  # they are a minute old when the import runs again
        os.utime(path, (path.stat().st_atime - 120, path.stat().st_mtime - 120))

    again = subprocess.run(
        [*command, "--registry", str(empty_registry.root)], capture_output=True, text=True, check=False, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert f"note: removed {len(temporaries)} temporary file(s) left in the registry by an interrupted write" in (
        again.stderr
    )
    validation = validate_registry(empty_registry)
    assert validation.ok, [str(problem) for problem in validation.problems]
    assert validation.counts["BenchmarkRun"] == LARGE + 5


def test_a_fresh_temporary_file_is_left_alone(empty_registry: Registry, copy_dataset: CopyDataset) -> None:
    dataset = copy_dataset("current_schema")
    shard = empty_registry.records_dir / "Workload" / "ab"
    shard.mkdir(parents=True)
    live = shard / f".{'a' * 64}.json.zz81kq.tmp"
    live.write_bytes(b"{")  # another writer's, mid-write
    report = import_flashinfer_bench(empty_registry, dataset)
    assert live.exists()
    assert any("1 temporary file(s) in the registry are younger than 60 s" in note for note in report.notes)


# --------------------------------------------------------------------------- a second Definition of one name


def _rmsnorm_dataset(root: Path, description: str) -> Path:
    """A dataset with the bundled definition's name, rmsnorm_h4096, and one trace."""
    bundled = json.loads((Path(__file__).parents[2] / "definitions/rmsnorm/rmsnorm_h4096/definition.json").read_text())
    spec = bundled["spec"]
    definition = {
        "name": "rmsnorm_h4096",
        "op_type": "rmsnorm",
        "description": description,
        "axes": spec["axes"],
        "inputs": spec["inputs"],
        "outputs": spec["outputs"],
        "reference": "def run(hidden_states, weight):\n    return hidden_states\n",
    }
    (root / "definitions/rmsnorm").mkdir(parents=True)
    (root / "definitions/rmsnorm/rmsnorm_h4096.json").write_text(json.dumps(definition))
    (root / "workloads/rmsnorm").mkdir(parents=True)
    workload = {
        "definition": "rmsnorm_h4096",
        "solution": None,
        "workload": {"uuid": "w-1", "axes": {"batch_size": 7}, "inputs": {}},
        "evaluation": None,
    }
    (root / "workloads/rmsnorm/rmsnorm_h4096.jsonl").write_text(json.dumps(workload) + "\n")
    return root


def test_a_definition_named_like_a_bundled_one_is_refused_with_the_reason(
    bundled_registry: Registry, tmp_path: Path, cli: RunCli
) -> None:
    dataset = _rmsnorm_dataset(tmp_path / "dataset", "another rmsnorm")
    before = sum(1 for _ in bundled_registry.record_files(["Definition"]))
    result = cli("import", "flashinfer-bench", dataset, "--registry", bundled_registry.root)
    assert result.exit_code == 1, result.output
    assert (
        "skipped: definitions/rmsnorm/rmsnorm_h4096.json: the registry already has a Definition named "
        "rmsnorm_h4096 (sha256:" in result.stderr
    )
    assert (
        "in spec.description, spec.determinism, spec.reference, spec.tags; two Definitions of one name" in result.stderr
    )
    assert "Import into a scratch registry (docs/importing.md), or pass --allow-redefinition" in result.stderr
    assert (
        "skipped: workloads/rmsnorm/rmsnorm_h4096.jsonl:1: definition rmsnorm_h4096 was not imported: the registry "
        "has another Definition of that name (definitions/rmsnorm/rmsnorm_h4096.json)" in result.stderr
    )
    assert sum(1 for _ in bundled_registry.record_files(["Definition"])) == before
    assert cli("leaderboard", "rmsnorm_h4096", "--registry", bundled_registry.root).exit_code == 0

    # the working route: a scratch registry takes it as it is
    scratch = tmp_path / "scratch"
    assert cli("init", scratch).exit_code == 0
    assert cli("import", "flashinfer-bench", dataset, "--registry", scratch).exit_code == 0

    # and on purpose, a second version
    forced = cli("import", "flashinfer-bench", dataset, "--registry", bundled_registry.root, "--allow-redefinition")
    assert forced.exit_code == 0, forced.output
    assert sum(1 for _ in bundled_registry.record_files(["Definition"])) == before + 1
    # once the registry has that version too, importing it again is no conflict: it is present
    again = cli("import", "flashinfer-bench", dataset, "--registry", bundled_registry.root)
    assert again.exit_code == 0, again.output
    assert all(line.startswith("present  ") for line in again.stdout.splitlines())


def test_the_same_definition_as_the_registry_is_simply_present(empty_registry: Registry, tmp_path: Path) -> None:
    dataset = _rmsnorm_dataset(tmp_path / "dataset", "one rmsnorm")
    assert import_flashinfer_bench(empty_registry, dataset).ok
    again = import_flashinfer_bench(empty_registry, dataset)
    assert again.ok
    assert all(not outcome.new for outcome in again.outcomes)
