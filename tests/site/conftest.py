"""A registry for the site's tests and the site built from it, once per session.

The registry is a copy of the bundled one (its signed H200 runs) in its own
git repository, with two defects added and committed the way they would reach
a real registry:

* a *tampered* run: a passed run of ``gqa_paged_decode_h32_kv8_d128_ps1``
  whose file was edited after it was named (its median made a thousand times
  faster), so its bytes no longer hash to its name and it becomes #1 of its
  group;
* an *unsigned* run: a new run of ``gqa_paged_prefill_causal_h20_kv4_d128_ps64``
  with no submission signature.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from kictl import canon
from kictl.index.facts import RunFacts
from kictl.index.query import QueryIndex
from kictl.records import record_from_value
from kictl.site import BuildReport, build_site
from kictl.store.registry import Registry
from tests.conftest import copy_bundled

DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
TAMPERED_DEFINITION = "gqa_paged_decode_h32_kv8_d128_ps1"
UNSIGNED_DEFINITION = "gqa_paged_prefill_causal_h20_kv4_d128_ps64"


@dataclass(frozen=True)
class SiteWorld:
    registry: Registry
    out: Path
    report: BuildReport
    tampered: str  # digest (the file's name) of the tampered run
    unsigned: str  # digest of the unsigned run
    ordinary: str  # a signed, intact, ranked run of DEFINITION


def _runs_of(index: QueryIndex, name: str) -> list[RunFacts]:
    definition = index.resolve_definition(name)
    return sorted(index.runs_of_definition(definition.digest), key=lambda run: run.digest)


def commit_all(root: Path, message: str) -> None:
    import git

    repo = git.Repo(root)
    repo.git.add("-A", "registry")
    repo.index.commit(message)


def add_unsigned_run(registry: Registry, template: RunFacts, *, observed_at: str, factor: float = 1.0) -> str:
    """A copy of ``template``'s record with another observation time (and latencies scaled), stored unsigned."""
    raw = copy.deepcopy(registry.load(template.digest).raw)
    raw["metadata"] = {"name": raw["metadata"]["name"] + ".unsigned-copy"}
    raw["spec"]["observedAt"] = observed_at
    latencies = raw["spec"]["timing"]["latencyNs"]
    for statistic in latencies:
        latencies[statistic] = int(latencies[statistic] * factor)
    raw["spec"]["timing"].pop("samples", None)
    (result,) = registry.add([record_from_value(raw)])
    return result.record.digest


def make_world(root: Path, out: Path) -> SiteWorld:
    registry = copy_bundled(root, results=True)
    with QueryIndex.open(registry) as index:
        decode = [run for run in _runs_of(index, TAMPERED_DEFINITION) if run.status == "passed"]
        h20 = [run for run in _runs_of(index, UNSIGNED_DEFINITION) if run.status == "passed"]
        ordinary = next(run for run in _runs_of(index, DEFINITION) if run.status == "passed")
    victim = max(decode, key=lambda run: (run.latency_ns or 0, run.digest))
    path = registry.record_path("BenchmarkRun", victim.digest)
    raw = canon.parse_json(path.read_bytes())
    statistic = raw["spec"]["timing"]["primaryStatistic"]
    raw["spec"]["timing"]["latencyNs"][statistic] //= 1000
    raw["spec"]["timing"].pop("samples", None)
    path.write_bytes(canon.pretty_bytes(raw))  # same name, other bytes: tampered
    unsigned = add_unsigned_run(registry, h20[0], observed_at="2026-11-30T12:00:00.000Z")
    commit_all(root, "A tampered run and an unsigned one")
    report = build_site(registry, out)
    return SiteWorld(registry, out, report, victim.digest, unsigned, ordinary.digest)


@pytest.fixture(scope="session")
def site_world(tmp_path_factory: pytest.TempPathFactory) -> SiteWorld:
    base = tmp_path_factory.mktemp("site")
    return make_world(base / "registry", base / "out")


def read_json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))
