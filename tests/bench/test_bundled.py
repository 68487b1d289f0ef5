"""Done-when of issue 4: on the CPU, every bundled definition's workloads run with the torch
implementation against kictl's reference worker, sandboxed, and the records written validate.

The cheapest protocol that still checks everything: one correctness round, no warm-up, one timed
call (``FAST``), which is then always audited.  The reference runs in kictl's own worker only (issue
10: an implementation's outputs are never the reference's), so it is not benchmarked here as well.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl.store import Registry
from tests.bench.conftest import FAST, IMPLEMENTATIONS
from tests.conftest import REPO_ROOT, RunCli

DEFINITIONS = sorted(path.name for path in IMPLEMENTATIONS.iterdir() if path.is_dir())
#: Definitions whose workloads take minutes on the CPU (the ps64 prefill's largest, 1,117 queries over 71,488
#: keys, takes the reference about 45 s a call): one test per workload, so that pytest-xdist spreads them.
ONE_BY_ONE = ("gqa_paged_prefill_causal_h20_kv4_d128_ps64", "gqa_paged_decode_h32_kv8_d128_ps1")


def _workload_labels(definition: str) -> list[str]:
    (folder,) = [path for path in (REPO_ROOT / "definitions").glob(f"*/{definition}") if path.is_dir()]
    lines = (folder / "workloads.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["metadata"]["name"] for line in lines if line.strip()]


#: (definition, workload or None for all of them)
CASES = [
    (definition, workload)
    for definition in DEFINITIONS
    for workload in (_workload_labels(definition) if definition in ONE_BY_ONE else [None])
]


def _torch_implementation(definition: str) -> Path:
    (found,) = [path for path in (IMPLEMENTATIONS / definition).iterdir() if path.name.startswith("torch")]
    return found


def test_the_cases_cover_every_bundled_workload(bundled_registry: Registry) -> None:
    for definition in DEFINITIONS:
        digest = bundled_registry.resolve(definition, ["Definition"]).digest
        held = {
            r.name for r in bundled_registry.iter_records(["Workload"]) if r.raw["spec"]["definitionDigest"] == digest
        }
        cases = [workload for name, workload in CASES if name == definition]
        assert cases == [None] or set(cases) == held, (definition, cases, held)


@pytest.mark.slow
@pytest.mark.parametrize(("definition", "workload"), CASES, ids=[f"{d}-{w}" if w else d for d, w in CASES])
def test_every_bundled_workload_runs_on_the_cpu(
    cli: RunCli, bundled_registry: Registry, tmp_path: Path, definition: str, workload: str | None
) -> None:
    workloads = {
        record.name
        for record in bundled_registry.iter_records(["Workload"])
        if record.raw["spec"]["definitionDigest"] == bundled_registry.resolve(definition, ["Definition"]).digest
    }
    if workload is not None:
        workloads = {workload}
    out = tmp_path / "out"
    result = cli(
        "bench",
        definition,
        # kictl's own reference worker runs the reference on every workload: benchmarking the reference's
        # text as an implementation too would only repeat that work
        "--impl",
        _torch_implementation(definition),
        *FAST,
        *(("--workload", workload) if workload is not None else ()),
        "--timeout",
        "1800",
        "--registry",
        bundled_registry.root,
        "--out",
        out,
        "--json",
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {row["workload"] for row in rows} == workloads
    assert len(rows) == len(workloads)
    assert all(row["status"] == "passed" for row in rows), [r for r in rows if r["status"] != "passed"]
    added = cli("add", out, "--registry", bundled_registry.root)
    assert added.exit_code == 0, added.output
    validated = cli("validate", "--registry", bundled_registry.root, "--json")
    assert validated.exit_code == 0, validated.output
    assert json.loads(validated.stdout)["counts"]["BenchmarkRun"] == len(rows)
