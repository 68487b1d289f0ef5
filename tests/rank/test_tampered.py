"""Readers never rank, show or cite a record whose file no longer matches its digest (issue 13).

The attack: in a checkout (a PR branch), a run file's median is halved in place, keeping its
file name; before, `kictl leaderboard` ranked it #1 and `kictl cite` cited it, exit 0.
"""

from __future__ import annotations

import json

from kictl.records import StoredRecord
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.rank.conftest import World
from tests.rank.test_cli_rank import ranked  # noqa: F401  (fixture)

_ARGS = ("leaderboard", "gemm_n64_k64", "--workload", "m128", "--gpu", "H200", "--json")


def _halve(registry: Registry, digest: str) -> None:
    path = registry.record_path("BenchmarkRun", digest)
    value = json.loads(path.read_bytes())
    value["spec"]["timing"]["latencyNs"]["median"] //= 2
    path.write_bytes(json.dumps(value, indent=2).encode() + b"\n")


def test_a_tampered_run_is_left_out_with_a_warning(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:  # noqa: F811
    slow = ranked["run_slow_m128"]
    _halve(world.registry, slow.digest)
    result = cli(*_ARGS, "--registry", world.registry.root)
    assert result.exit_code == 0, result.output
    (group,) = json.loads(result.stdout)
    assert [row["implementation"] for row in group["rows"]] == ["fast", "flashinfer_wrapper_abc123"]
    assert slow.digest not in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr
    assert "left out" in warnings[0]


def test_a_tampered_run_is_not_cited(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:  # noqa: F811
    slow = ranked["run_slow_m128"]
    _halve(world.registry, slow.digest)
    result = cli("cite", slow.digest, "--registry", world.registry.root)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "does not match its digest" in error
    assert "not cited" in error


def test_an_intact_run_is_still_cited(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:  # noqa: F811
    result = cli("cite", ranked["run_fast_m128"].digest, "--registry", world.registry.root)
    assert result.exit_code == 0, result.output


def test_the_cli_help_names_kictl_ranks_evidence_levels() -> None:
    """cli/rank keeps the levels for its help text without importing kictl.rank; they must agree."""
    from kictl import rank
    from kictl.cli import rank as cli_rank

    assert cli_rank.EVIDENCE_LEVELS == rank.EVIDENCE_LEVELS
    assert cli_rank.DEFAULT_EVIDENCE == rank.DEFAULT_EVIDENCE
