"""A review of a PR branch that adds 1,000 runs, each with its submission envelope, checks every one of them.

Everything runs: 1,001 signatures verified against the trust root, floors, and the
leaderboard diff of both revisions through the query index.  How long it takes is
``benchmarks/review_scale.py``'s claim, not this test's (a timed test fails on a loaded machine).
"""

from __future__ import annotations

import json

import pytest

from kictl import canon
from tests import factories
from tests.conftest import RunCli
from tests.review.conftest import Pr, envelope

RUNS = 1_000


@pytest.mark.slow
def test_review_of_a_thousand_runs(cli: RunCli, pr: Pr) -> None:
    environments = [factories.environment(product) for product in ("H100", "B200")]
    implementations = [
        factories.implementation(canon.record_digest(pr.base.definition), name=f"kernel_{i}") for i in range(8)
    ]
    for raw in (*environments, *implementations):
        pr.add_record(raw)
    labels = sorted(pr.base.workloads)
    groups = {(labels[n % len(labels)], n % len(environments)) for n in range(RUNS)}
    for number in range(RUNS):
        run = pr.base.run_like(
            workload=labels[number % len(labels)],
            median_ns=5_000_000 + number,
            implementationDigest=canon.record_digest(implementations[number % len(implementations)]),
            environmentDigest=canon.record_digest(environments[number % len(environments)]),
        )
        pr.add_record(run)
        pr.add_envelope(run, envelope(run))
    below = pr.base.run_like(median_ns=1_000)  # one impossible run among them must still be caught
    pr.add_record(below)
    pr.add_envelope(below, envelope(below))
    pr.commit("1,001 runs")

    result = cli("review", "--registry", pr.root, "--base", "main", "--format", "json")

    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["added"]["records"]["BenchmarkRun"] == RUNS + 1
    assert document["added"]["attestations"] == RUNS + 1
    assert [lint["code"] for lint in document["lints"]] == ["below-floor"]  # every envelope verified
    assert document["notChecked"] == []
    # each group of the new runs gets its first #1, and the impossible run tops torch_matmul's group
    assert len(document["leaderboards"]) == len(groups) + 1
    assert [hint["code"] for hint in document["hints"]] == ["new-first"] * (len(groups) + 1)
