"""CPU runs are labelled as CPUs wherever a device is named, never shown as if they were a GPU (issue 13)."""

from __future__ import annotations

import json

import pytest

from kictl.index.parsing import device_label, is_cpu
from kictl.records import ExecutionEnvironmentSpec, Framework, Hardware, Software, StoredRecord, new_record
from tests.conftest import RunCli
from tests.rank.conftest import World

EPYC = "AMD EPYC 7763 64-Core Processor"


@pytest.mark.parametrize(
    ("hardware", "label"),
    [
        (Hardware(vendor="AMD", product=EPYC, architecture="x86_64", cpu=EPYC), f"CPU: {EPYC}"),
        (Hardware(product="Neoverse-N1", architecture="aarch64"), "CPU: Neoverse-N1"),
        (Hardware(product="CPU"), "CPU"),
        (Hardware(vendor="NVIDIA", product="NVIDIA H200", architecture="sm_90", cpu=EPYC), "H200"),
        (Hardware(vendor="NVIDIA", product="H200", sm_count=132, compute_capability="9.0"), "H200"),
        (Hardware(vendor="AMD", product="AMD Instinct MI300X", architecture="gfx942"), "MI300X"),
        (Hardware(vendor="NVIDIA", product="NVIDIA Some Future GPU", sm_count=200), "Some Future GPU"),
    ],
)
def test_device_label(hardware: Hardware, label: str) -> None:
    assert device_label(hardware) == label
    assert is_cpu(hardware) == label.startswith("CPU")


def _cpu_environment(world: World) -> StoredRecord:
    spec = ExecutionEnvironmentSpec(
        hardware=Hardware(vendor="AMD", product=EPYC, architecture="x86_64", cpu=EPYC),
        software=Software(framework=Framework(name="pytorch", version="2.13.0")),
    )
    return world._keep(new_record(spec, name="epyc"))


def test_a_cpu_run_is_labelled_cpu_in_the_leaderboards(
    cli: RunCli, world: World, basic: dict[str, StoredRecord]
) -> None:
    b = basic
    cpu = _cpu_environment(world)
    world.run(b["m128"], b["fast"], b["protocol"], cpu, 2_000_000)
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.commit("a CPU run and a GPU run")
    result = cli("leaderboard", "gemm_n64_k64", "--registry", world.registry.root, "--json")
    assert result.exit_code == 0, result.output
    assert sorted(board["gpu"] for board in json.loads(result.stdout)["boards"]) == [f"CPU: {EPYC}", "H200"]
    text = cli("leaderboard", "gemm_n64_k64", "--registry", world.registry.root).stdout
    assert f"CPU: {EPYC} · kictl-cuda-events · median" in text
    assert "\nEPYC" not in text
    one = cli(
        "leaderboard", "gemm_n64_k64", "--workload", "m128", "--gpu", f"cpu: {EPYC}", "--registry", world.registry.root
    )
    assert one.exit_code == 0, one.output
    assert one.stdout.count("CPU: AMD EPYC") == 2  # the group's title and "not in the datasheet table"
