"""Names and pages nobody can borrow: PR branches that imitate a held name, a look-alike or unknown GPU.

Real git repositories, real signed runs (the review fixtures); each attack is one PR.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kictl import canon
from kictl.lookup import fold_name
from tests.conftest import RunCli
from tests.review.conftest import Pr, envelope, run_review


def _codes(cli: RunCli, pr: Pr) -> tuple[list[str], list[dict[str, Any]]]:
    """The review's lints, as JSON (one review: the Markdown rendering is tested once, below)."""
    result = cli("review", "--registry", str(pr.root), "--base", "main", "--format", "json")
    assert result.exit_code in (0, 1), result.output
    document = json.loads(result.stdout)
    return [lint["code"] for lint in document["lints"]], document["lints"]


def _environment(pr: Pr, product: str) -> dict[str, Any]:
    raw = copy.deepcopy(pr.base.environment)
    raw["spec"]["hardware"]["product"] = product
    raw["metadata"]["name"] = "another-" + raw["metadata"]["name"]
    return raw


def _run_on(pr: Pr, environment: dict[str, Any], median_ns: int = 50_000) -> dict[str, Any]:
    run = pr.base.run_like(median_ns=median_ns, environmentDigest=canon.record_digest(environment))
    pr.add_record(environment)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    return run


@pytest.mark.parametrize(
    ("name", "other"),
    [
        ("torch_rmsnorm_1c6d2a", "torch_rmsnorm_1c6d2a"),
        ("Torch-RMSNorm-1C6D2A", "torch_rmsnorm_1c6d2a"),
        ("H200", "h2oo"),
        ("rmsnorm_h4096", "RMSNORM_H4096"),
        ("gemm_n4096_k4096", "gemrn_n4O96_k4096"),
    ],
)
def test_folding_joins_look_alikes(name: str, other: str) -> None:
    assert fold_name(name) == fold_name(other)


def test_folding_keeps_honest_names_apart() -> None:
    honest = ["rmsnorm_h4096", "rmsnorm_h2048", "gemm_n4096_k4096", "gemm_n2048_k4096", "H100", "H200", "B200"]
    assert len({fold_name(name) for name in honest}) == len(honest)


def test_an_implementation_borrowing_a_held_name_is_refused(cli: RunCli, pr: Pr) -> None:
    raw = copy.deepcopy(pr.base.implementation)
    held = raw["spec"]["name"]
    raw["spec"]["sources"][0]["content"] += "\n# another body\n"
    raw["spec"]["sources"][0]["sha256"] = canon.sha256_hex(raw["spec"]["sources"][0]["content"].encode())
    raw["spec"]["name"] = held.upper()  # the same row label, once folded
    raw["metadata"]["name"] = held.upper()
    pr.add_record(raw)
    pr.commit()
    codes, lints = _codes(cli, pr)
    assert codes == ["name-taken"], lints
    assert "is taken" in lints[0]["message"]


def test_a_definition_taking_over_a_page_is_refused_but_a_new_version_is_not(cli: RunCli, pr: Pr) -> None:
    raw = copy.deepcopy(pr.base.definition)
    raw["spec"]["description"] = (raw["spec"].get("description") or "") + " (edited)"
    pr.add_record(raw)  # a new version under its own name: allowed
    pr.commit("a new version")
    codes, _ = _codes(cli, pr)
    assert "name-taken" not in codes
    imitation = copy.deepcopy(raw)
    imitation["spec"]["name"] = imitation["metadata"]["name"] = raw["spec"]["name"].upper()
    pr.add_record(imitation)
    pr.commit("an imitation")
    codes, lints = _codes(cli, pr)
    assert "name-taken" in codes, lints


def test_a_look_alike_gpu_product_is_refused(cli: RunCli, pr: Pr) -> None:
    _run_on(pr, _environment(pr, "H2OO"))
    pr.commit()
    reviewed = run_review(cli, pr)  # JSON and Markdown alike, and the Markdown renders
    codes, lints = reviewed.lint_codes, reviewed.document["lints"]
    assert "name-taken" in codes, lints
    assert "reads as 'H200'" in next(lint["message"] for lint in lints if lint["code"] == "name-taken")


def test_a_non_ascii_gpu_product_is_a_schema_error(cli: RunCli, pr: Pr) -> None:
    _run_on(pr, _environment(pr, "\u041d200"), median_ns=5_000)  # Cyrillic En: its own board, no floor, #1
    pr.commit()
    codes, lints = _codes(cli, pr)
    assert "schema" in codes, lints
    assert all(code != "new-first" for code in codes)


def test_a_run_on_an_unknown_gpu_gets_no_free_pass(cli: RunCli, pr: Pr) -> None:
    _run_on(pr, _environment(pr, "Imaginary GPU 9000"), median_ns=5_000)
    pr.commit()
    codes, lints = _codes(cli, pr)
    assert "unknown-gpu" in codes, lints
