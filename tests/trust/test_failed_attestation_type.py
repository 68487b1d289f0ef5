"""A rejected envelope shows the type it claims, marked as a claim (issue 45: its type showed as ``?``)."""

from __future__ import annotations

from tests.conftest import RunCli
from tests.trust.conftest import Setup, at, commit_all, rerun_predicate, sign


def test_an_envelope_by_an_unknown_key_shows_its_claimed_type(cli: RunCli, setup: Setup) -> None:
    sign(setup, setup.stranger, "rerun", rerun_predicate(1.01))
    commit_all(setup.registry, at("2025-07-01"), "a rerun by a key in no trust root")
    for command in ("verify", "show"):
        result = cli(command, setup.run.digest, "--registry", setup.registry.root)
        rows = [line.split() for line in result.stdout.splitlines() if "INVALID" in line]
        assert len(rows) == 1, (command, result.stdout)
        assert rows[0][:3] == ["rerun", "(claimed)", "INVALID"], (command, rows)
        assert "?" not in rows[0][0]
