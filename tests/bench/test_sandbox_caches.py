"""JIT caches in the sandbox (``$KICTL_SANDBOX_CACHE``): warm for each worker, never shared between them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl.store.registry import Registry
from tests.bench.conftest import FAST, SANDBOX
from tests.conftest import RunCli

IMPLEMENTATION = '''
"""Reads a compiled kernel from the JIT cache and rewrites it, as a JIT tool's build step would."""

from pathlib import Path

import torch

CACHE = Path({cache!r})


def setup(hidden_states, weight):
    seen = (CACHE / "kernel.so").read_text()
    if seen != "compiled by an earlier run":
        raise RuntimeError(f"the cache is not warm: {{seen!r}}")
    (CACHE / "kernel.so").write_text("rewritten by an implementation")
    (CACHE / "planted.so").write_text("for the next implementation")


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
'''


@pytest.mark.skipif(not SANDBOX, reason="needs a working bubblewrap sandbox")
def test_each_worker_gets_a_private_writable_copy_of_the_cache(
    cli: RunCli, bundled_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "jit-cache"
    cache.mkdir()
    (cache / "kernel.so").write_text("compiled by an earlier run")
    source = tmp_path / "cache_user.py"
    source.write_text(IMPLEMENTATION.format(cache=str(cache)))
    monkeypatch.setenv("KICTL_SANDBOX_CACHE", str(cache))
    result = cli(
        "bench",
        "rmsnorm_h4096",
        "--impl",
        source,
        "--workload",
        "b1",
        *FAST,
        "--registry",
        bundled_registry.root,
        "--out",
        tmp_path / "out",
        "--json",
    )
    rows = json.loads(result.stdout)
    assert [row["status"] for row in rows] == ["passed"], result.output
    # the worker read the warm cache and wrote to its own copy: the folder kictl was given is untouched
    assert (cache / "kernel.so").read_text() == "compiled by an earlier run"
    assert not (cache / "planted.so").exists()
