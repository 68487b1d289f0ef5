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

from kictl.store.registry import Registry
from tests.bench.conftest import BUNDLED_DEFINITIONS, FAST, IMPLEMENTATIONS
from tests.conftest import RunCli

DEFINITIONS = BUNDLED_DEFINITIONS


def _torch_implementation(definition: str) -> Path:
    (found,) = [path for path in (IMPLEMENTATIONS / definition).iterdir() if path.name.startswith("torch")]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("definition", DEFINITIONS)
def test_every_bundled_workload_runs_on_the_cpu(
    cli: RunCli, bundled_registry: Registry, tmp_path: Path, definition: str
) -> None:
    workloads = {
        record.name
        for record in bundled_registry.iter_records(["Workload"])
        if record.raw["spec"]["definitionDigest"] == bundled_registry.resolve(definition, ["Definition"]).digest
    }
    out = tmp_path / "out"
    result = cli(
        "bench",
        definition,
        # kictl's own reference worker runs the reference on every workload: benchmarking the reference's
        # text as an implementation too would only repeat that work
        "--impl",
        _torch_implementation(definition),
        *FAST,
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
