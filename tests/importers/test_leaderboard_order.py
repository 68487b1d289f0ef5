"""Issue 6, Done-when: `kictl leaderboard gemm_n_4096_k_4096` orders implementations as the source's latencies do.

../shared/data/flashinfer-trace-legacy (skipped when absent) holds 129 traces
of two solutions on 43 GEMM workloads measured on a B200; triton's solution has
two traces per workload.  For every workload, ``kictl leaderboard
gemm_n_4096_k_4096 --workload <uuid> --json`` must list each solution once, at
its best (lowest) ``latency_ms``, in the source's order, and give the ranks
DESIGN §6 asks for: the imported runs carry only a mean, so each run's noise is
the policy's ``tieTolerance`` times its latency, and a row shares the rank of
its rank's first row when the two differ by no more than the larger noise
(competition ranking: 1, 1, 3).  No two solutions are within the default 2%
of each other in this data, so the test runs again with ``tieTolerance`` 0.3,
under which four workloads tie.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kictl import canon
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.importers.conftest import Imported

DEFINITION = "gemm_n_4096_k_4096"


def _source_best(dataset: Path) -> dict[str, dict[str, int]]:
    """Workload uuid -> solution (as the traces name it) -> its best latency_ms, in integer ns."""
    lines = (dataset / "traces/workloads/gemm/gemm_n_4096_k_4096.workload.jsonl").read_text().splitlines()
    uuid_by_m = {line["workload"]["axes"]["M"]: line["workload"]["uuid"] for line in map(json.loads, lines)}
    best: dict[str, dict[str, int]] = {}
    for text in (dataset / "traces/gemm/gemm_n_4096_k_4096.jsonl").read_text().splitlines():
        line = json.loads(text)
        assert line["evaluation"]["status"] == "PASSED"
        uuid = uuid_by_m[line["workload"]["axes"]["M"]]
        ns = round(line["evaluation"]["performance"]["latency_ms"] * 1e6)
        solutions = best.setdefault(uuid, {})
        solutions[line["solution"]] = min(ns, solutions.get(line["solution"], ns))
    return best


def _expected_ranks(latencies: list[int], tolerance: float) -> list[int]:
    """DESIGN §6 by hand, for runs whose noise is ``tolerance`` × latency."""
    ranks: list[int] = []
    first = 0  # index of the current rank's first row
    for position, latency in enumerate(latencies):
        leader = latencies[first]
        if position and abs(latency - leader) <= tolerance * max(latency, leader):
            ranks.append(ranks[first])
        else:
            first = position
            ranks.append(position + 1)
    return ranks


def _solution_of(registry: Registry, run_digest: str) -> str:
    """The trace's solution name, from the run's ``sourceNative.externalId`` (``trace/<solution>/<uuid>``)."""
    spec: dict[str, Any] = registry.load(run_digest).raw["spec"]
    external: str = spec["sourceNative"]["externalId"]
    return external.split("/")[1]


@pytest.mark.parametrize("tie_tolerance", [None, 0.3], ids=["policy-default", "tie-tolerance-0.3"])
def test_leaderboard_orders_implementations_as_the_source_latencies(
    legacy_imported: Imported, cli: RunCli, tmp_path: Path, tie_tolerance: float | None
) -> None:
    registry = legacy_imported.registry
    if tie_tolerance is not None:
        root = tmp_path / "registry"
        shutil.copytree(registry.root, root, ignore=shutil.ignore_patterns(".kictl"))
        policy = json.loads((root / "registry/policy.json").read_text())
        policy["tieTolerance"] = tie_tolerance
        (root / "registry/policy.json").write_bytes(canon.pretty_bytes(policy))
        registry = Registry(root)
    tolerance = registry.policy().tie_tolerance
    source = _source_best(legacy_imported.dataset)
    assert len(source) == 43
    ties = reorders = 0
    for uuid, best in sorted(source.items()):
        result = cli("leaderboard", DEFINITION, "--workload", uuid, "--registry", registry.root, "--json")
        assert result.exit_code == 0, result.output
        (group,) = json.loads(result.stdout)
        assert (group["workloadName"], group["gpu"], group["primaryStatistic"]) == (uuid, "B200", "mean")
        rows = group["rows"]
        assert all(row["noiseSource"] == "policy" for row in rows), rows
        solutions = [_solution_of(registry, row["run"]) for row in rows]
        assert sorted(solutions) == sorted(best), uuid  # each solution once, at its best run
        assert [row["latencyNs"] for row in rows] == [best[name] for name in solutions], uuid
        expected = sorted(best, key=lambda name: best[name])
        assert solutions == expected, f"{uuid}: {solutions} vs the source's {expected}"
        latencies = [best[name] for name in expected]
        ranks = _expected_ranks(latencies, tolerance)
        assert [row["rank"] for row in rows] == ranks, f"{uuid}: latencies {latencies}"
        assert [row["tied"] for row in rows] == [i > 0 and r == ranks[i - 1] for i, r in enumerate(ranks)]
        ties += len(set(ranks)) < len(ranks)
        reorders += expected != sorted(expected)
    assert reorders > 0  # the source ranks the two solutions differently across workloads
    assert ties == (0 if tie_tolerance is None else 4)
