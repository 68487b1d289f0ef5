"""Hostile implementations are caught, broken ones fail cleanly, and no one loses another's record (issues 4, 10).

One ``kictl bench`` session, sandboxed, runs the definition's reference, the torch implementation, three
fair implementations and every cheat of ``tests/assets/cheats`` side by side on one workload, so that the
test also shows that each run's record survives whatever the others did.  The cheats of issue 10 come in
six classes (the file name's prefix): ``wire_`` (code in kictl's process), ``timer_`` (the timer from the
same interpreter), ``values_`` (answers that do not depend on the timed values), ``escape_`` (work that
escapes the measurement), ``reach_`` (other processes), ``drop_`` (making kictl drop everyone's results).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from kictl.selftest import judge, load_corpus
from tests.bench.conftest import CHEATS, IMPLEMENTATIONS, SANDBOX, rows

pytestmark = pytest.mark.skipif(not SANDBOX, reason="needs bubblewrap (apt-get install bubblewrap)")

RMSNORM = "rmsnorm_h4096"
#: The CPU session of the exploit corpus (tests/assets/cheats/corpus.json, issue 28): what each entry must do.
#: A new cheat is listed there (class, expected check, advisories), never here.
CORPUS = load_corpus(CHEATS)
SESSION = "rmsnorm-cpu"
_CPU = {name: entry.expect[SESSION] for name, entry in CORPUS.corpus.entries.items() if SESSION in entry.expect}
HONEST = tuple(sorted(name for name, expect in _CPU.items() if expect.status == "passed"))
#: Would-be cheats that gain nothing: none left (the caches keyed on identity, pointer, version or sampled
#: values are all caught; the probes write through ``.data``, so a (pointer, ``_version``) key sees no change).
GAIN_NOTHING: tuple[str, ...] = ()
CAUGHT_BY: dict[str, str | tuple[str, ...]] = {
    name: expect.checks[0] if len(expect.checks) == 1 else tuple(expect.checks)
    for name, expect in _CPU.items()
    if expect.checks is not None
}
FAILS_AS = {
    name: (expect.status, expect.detail or "")
    for name, expect in _CPU.items()
    if expect.status not in ("passed", "reward_hack")
}


def _by_implementation(result: Result) -> dict[str, dict[str, Any]]:
    return {row["implementation"].rsplit("_", 1)[0]: row for row in rows(result)}


def _daemons() -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            text = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"kictl-cheat-daemon-marker" in text:
            found.append(entry)
    return found


@pytest.fixture(scope="module")
def session_result(bench_module: Callable[..., Result]) -> Result:
    names = [*HONEST, *GAIN_NOTHING, *CAUGHT_BY, *FAILS_AS]
    impls = [arg for name in names for arg in ("--impl", CHEATS / f"{name}.py")]
    return bench_module(
        RMSNORM,
        "--impl",
        IMPLEMENTATIONS / RMSNORM / "reference",
        "--impl",
        IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm",
        *impls,
        "--workload",
        "b64",
        "--device",
        "cpu",
        "--rounds",
        "2",
        "--warmup",
        "1",
        "--iterations",
        "12",
        "--timeout",
        "10",
    )


def test_every_run_is_recorded_and_the_fair_ones_pass(session_result: Result) -> None:
    assert session_result.exit_code == 1, session_result.output
    found = _by_implementation(session_result)
    assert set(found) == {"reference", "torch_rmsnorm", *HONEST, *GAIN_NOTHING, *CAUGHT_BY, *FAILS_AS}
    for name in ("reference", "torch_rmsnorm", *HONEST, *GAIN_NOTHING):
        assert found[name]["status"] == "passed", (name, found[name]["statusDetail"])
        assert found[name]["run"] is not None
    assert all(row["run"] for row in found.values()), "a run lost its record"
    expected_failures = len(CAUGHT_BY) + len(FAILS_AS)
    assert session_result.stderr.rstrip().endswith(
        f"error: {expected_failures} of {expected_failures + 2 + len(HONEST) + len(GAIN_NOTHING)} runs did not pass"
    ), session_result.stderr


@pytest.mark.parametrize(("cheat", "check"), sorted(CAUGHT_BY.items()))
def test_cheat_is_caught_naming_the_check(session_result: Result, cheat: str, check: str | tuple[str, ...]) -> None:
    row = _by_implementation(session_result)[cheat]
    assert row["status"] == "reward_hack", row
    detail = row["statusDetail"]
    checks = (check,) if isinstance(check, str) else check
    assert any(detail.startswith(name) or f"; {name}:" in detail for name in checks), detail


def test_a_timeout_shows_where_the_worker_was(session_result: Result) -> None:
    """Before a silent worker is killed it is asked for its Python stacks (faulthandler), which its detail shows."""
    detail = _by_implementation(session_result)["rmsnorm_hangs"]["statusDetail"]
    assert "(most recent call first)" in detail, detail
    assert 'rmsnorm_hangs.py", line 8 in run' in detail, detail


@pytest.mark.parametrize(("name", "expected"), sorted(FAILS_AS.items()))
def test_hostile_or_broken_implementation_fails_as_itself(
    session_result: Result, name: str, expected: tuple[str, str]
) -> None:
    status, words = expected
    row = _by_implementation(session_result)[name]
    assert row["status"] == status, row
    assert words in row["statusDetail"], row["statusDetail"]


def test_nothing_reaches_kictls_output_or_outlives_the_session(session_result: Result) -> None:
    json.loads(session_result.stdout)  # one clean document
    assert "FORGED-TABLE" not in session_result.stdout
    assert "FORGED-TABLE" not in session_result.stderr
    assert "Traceback" not in session_result.stderr, session_result.stderr
    assert _daemons() == []
    import torch

    site = Path(torch.__file__).parent.parent
    assert not (site / "kictl_planted_by_escape_remount.py").exists()
    assert not Path("/usr/kictl_planted_by_own_namespace").exists()


def test_runtime_error_detail_is_relative_to_the_implementation(session_result: Result) -> None:
    detail = _by_implementation(session_result)["rmsnorm_raises"]["statusDetail"]
    assert 'File "rmsnorm_raises.py", line 5, in run' in detail, detail
    assert "kictl" not in detail, detail
    assert "/tmp" not in detail, detail


def test_the_selftest_judges_every_cpu_entry_caught(session_result: Result) -> None:
    """``kictl selftest``'s judge over this session (the corpus's CPU session): every entry as the corpus says."""
    found = _by_implementation(session_result)
    missed = [
        name for name, expect in _CPU.items() if not judge(expect, found[name]["status"], found[name]["statusDetail"])
    ]
    assert missed == []
