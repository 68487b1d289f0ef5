"""The README's two commands stay true: CI runs the README's test command verbatim."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT


def _readme_commands() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text, flags=re.S)[:2]


def test_readme_opens_with_the_two_commands() -> None:
    main_job, tests = _readme_commands()
    assert "kictl validate" in main_job
    assert "pytest" in tests
    # issue 45: the dev install skipped the exporter tests; FlashInfer-Bench comes without its CUDA stack
    assert "pip install -q --no-deps 'flashinfer-bench==" in tests
    head = (REPO_ROOT / "README.md").read_text().split("```sh")[0]
    assert len(head.splitlines()) <= 4, "the two commands come first"


def test_ci_runs_the_readme_test_command() -> None:
    _, tests = _readme_commands()
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci, f"{tests!r} is not a line of .ci/run"
