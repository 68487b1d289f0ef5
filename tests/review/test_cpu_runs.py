"""Review calls a CPU a CPU (issue 45: "run(s) on GPUs without datasheet figures: Intel(R) Xeon(R)")."""

from __future__ import annotations

from kictl import canon
from tests import factories
from tests.conftest import RunCli
from tests.review.conftest import Pr, run_review


def test_a_cpu_run_is_not_checked_against_a_floor_and_is_called_a_cpu_run(cli: RunCli, pr: Pr) -> None:
    protocol = factories.protocol(family="kictl-cpu-wall-time")
    protocol["spec"]["measurement"]["timer"] = "perf_counter_ns"
    environment = factories.environment(product="Intel(R) Xeon(R) Processor")
    environment["metadata"]["name"] = "xeon-env"
    environment["spec"]["hardware"] = {
        "vendor": "Intel",
        "product": "Intel(R) Xeon(R) Processor",
        "architecture": "x86_64",
    }
    run = pr.base.run_like(median_ns=2_000_000)
    run["spec"]["protocolDigest"] = canon.record_digest(protocol)
    run["spec"]["environmentDigest"] = canon.record_digest(environment)
    for raw in (protocol, environment, run):
        pr.add_record(raw)
    pr.commit("a CPU run")
    reviewed = run_review(cli, pr)
    floors = [item["reason"] for item in reviewed.document["notChecked"] if item["check"] == "floors"]
    assert floors == ["1 run(s) on CPUs (no datasheet floor): Intel(R) Xeon(R) Processor"], floors
    assert "unknown-gpu" not in reviewed.lint_codes
    assert "GPU" not in " ".join(floors)
