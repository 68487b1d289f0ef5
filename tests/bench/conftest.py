"""Fixtures of the bench tests: a bundled registry shared by a module, kictl bench in-process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kictl.cli import make_app
from kictl.store.registry import Registry
from tests.conftest import ASSETS, REPO_ROOT, copy_bundled

CHEATS = ASSETS / "cheats"
IMPLEMENTATIONS = REPO_ROOT / "implementations"
#: The definitions with implementations of their own (``implementations/<definition>/``); ``families/`` holds the
#: implementations that serve a whole family of the catalogue (docs/importing.md), not a definition.
BUNDLED_DEFINITIONS = sorted(
    path.name for path in IMPLEMENTATIONS.iterdir() if path.is_dir() and path.name != "families"
)


def sandbox_available() -> bool:
    """Whether bubblewrap is here and can make a sandbox (CI installs it: .ci/run)."""
    from kictl.bench.judge import sandbox
    from kictl.errors import EnvError

    found = sandbox.find_bwrap()
    if found is None:
        return False
    try:
        sandbox.probe(found)
    except EnvError:
        return False
    return True


SANDBOX = sandbox_available()
#: Tests run sandboxed wherever bubblewrap works; elsewhere unconfined (and the sandbox's own tests skip).
UNSANDBOXED: tuple[str, ...] = () if SANDBOX else ("--no-sandbox",)
#: The cheapest way through a workload: one correctness round, one timed call.
FAST = ("--device", "cpu", "--warmup", "0", "--iterations", "1", "--trials", "1", "--rounds", "1", *UNSANDBOXED)


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def invoke(*args: str | Path) -> Result:
    """kictl in-process (module-scoped fixtures cannot use the function-scoped ``cli``)."""
    return CliRunner().invoke(make_app(), [str(arg) for arg in args], catch_exceptions=False)


def rows(result: Result) -> list[dict[str, Any]]:
    """The --json rows of a bench result."""
    parsed: list[dict[str, Any]] = json.loads(result.stdout)
    return parsed


@pytest.fixture(scope="module")
def shared_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """One copy of the bundled registry for a whole test module (read-only use)."""
    return copy_bundled(tmp_path_factory.mktemp("bench") / "bundled")


@pytest.fixture(scope="module")
def bench_module(shared_registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Result]:
    """``kictl bench`` against the shared registry, writing to a fresh --out folder."""

    def run(*args: str | Path) -> Result:
        out = tmp_path_factory.mktemp("out")
        return invoke("bench", *args, *UNSANDBOXED, "--registry", shared_registry.root, "--out", out, "--json")

    return run
