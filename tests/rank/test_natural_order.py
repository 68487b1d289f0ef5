"""Workloads sort naturally (m2, m16, m128; never m128, m16, m2) in every listing (issue 13)."""

from __future__ import annotations

import json

from kictl.records import StoredRecord
from kictl.render import natural_key
from tests.conftest import RunCli
from tests.rank.conftest import World

ORDER = ["m2", "m16", "m128", "m1024"]


def test_natural_key() -> None:
    names = ["b128x_kv1024", "b16x_kv1024", "b1_kv4096", "b1_kv73", "b64x_kv512", "b8x_kv8192"]
    assert sorted(names, key=natural_key) == [
        "b1_kv73",
        "b1_kv4096",
        "b8x_kv8192",
        "b16x_kv1024",
        "b64x_kv512",
        "b128x_kv1024",
    ]
    assert sorted(["x10", "X9", "x9"], key=natural_key) == ["X9", "x9", "x10"]
    assert sorted(["2b", "a", "10b"], key=natural_key) == ["2b", "10b", "a"]


def test_every_listing_sorts_workloads_naturally(cli: RunCli, world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    definition = b["definition"]
    workloads = {name: world.workload(definition, name, int(name[1:])) for name in reversed(ORDER)}
    for name, workload in workloads.items():
        world.run(workload, b["fast"], b["protocol"], b["h200"], 1_000 * int(name[1:]))
    world.commit("four workloads")
    root = world.registry.root
    board = json.loads(cli("leaderboard", "gemm_n64_k64", "--registry", root, "--json").stdout)
    (h200,) = board["boards"]
    assert [record["workloadName"] for record in h200["records"]] == ORDER
    text = cli("leaderboard", "gemm_n64_k64", "--registry", root).stdout
    positions = [text.index(f"  {name} ") for name in ORDER]
    assert positions == sorted(positions)
    floors = cli("floor", "gemm_n64_k64", "--gpu", "H200", "--registry", root).stdout
    names = [line.split()[0] for line in floors.splitlines()[3:] if line.startswith("m")]
    assert [name for name in names if name in ORDER] == ORDER
    assert names.index("m1") < names.index("m2")  # the fixture's m1 and m128 sort among them
    history = json.loads(cli("history", "gemm_n64_k64", "--registry", root, "--json").stdout)
    grouped = [group["workloadName"] for group in history["groups"]]
    assert [name for name in grouped if name in ORDER] == ORDER
