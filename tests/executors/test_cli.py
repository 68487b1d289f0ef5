"""``kictl bench --devices/--shard/--executor/--skip-existing``, once the command has the options.

The options live in ``kictl/cli/bench.py`` (wired at merge to
``kictl.executors.run_bench_jobs``); until then these tests skip.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kictl.cli import make_app
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.executors.conftest import BOTH, RMSNORM

FAST = ("--device", "cpu", "--warmup", "0", "--iterations", "1", "--trials", "1", "--rounds", "1")
IMPLS = tuple(item for path in BOTH for item in ("--impl", path))


def _wired() -> bool:
    result = CliRunner().invoke(make_app(), ["bench", "--help"], terminal_width=200)
    return all(flag in result.output for flag in ("--devices", "--shard", "--executor", "--skip-existing"))


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _wired(), reason="kictl bench has no --devices/--shard options yet"),
]


def _pairs(stdout: str) -> list[tuple[str, str, str]]:
    return sorted((row["implementation"], row["workload"], row["status"]) for row in json.loads(stdout))


def test_shards_of_the_command_add_up_to_the_whole(cli: RunCli, bundled_registry: Registry, tmp_path: Path) -> None:
    common = (RMSNORM, *IMPLS, "--workload", "b1", "--workload", "b7", *FAST, "--registry", bundled_registry.root)
    whole = cli("bench", *common, "--devices", "2", "--out", tmp_path / "whole", "--json")
    assert whole.exit_code == 0, whole.output
    parts = [cli("bench", *common, "--shard", f"{i}/2", "--out", tmp_path / f"s{i}", "--json") for i in (0, 1)]
    assert all(part.exit_code == 0 for part in parts), [part.output for part in parts]
    assert sorted(_pairs(parts[0].stdout) + _pairs(parts[1].stdout)) == _pairs(whole.stdout)
    assert len(_pairs(whole.stdout)) == 4


def test_skip_existing_runs_nothing_twice(cli: RunCli, bundled_registry: Registry) -> None:
    common = (RMSNORM, *IMPLS, "--workload", "b1", *FAST, "--registry", bundled_registry.root)
    first = cli("bench", *common, "--json")
    assert first.exit_code == 0, first.output
    again = cli("bench", *common, "--skip-existing", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == []


def test_bad_scale_options_are_usage_errors(cli: RunCli, bundled_registry: Registry) -> None:
    common = (RMSNORM, *IMPLS, *FAST, "--registry", bundled_registry.root)
    for extra in (("--shard", "2/2"), ("--executor", "slurm"), ("--devices", "cpu,cuda:0")):
        result = cli("bench", *common, *extra)
        assert result.exit_code == 2, result.output
