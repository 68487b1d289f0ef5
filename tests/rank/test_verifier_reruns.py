"""A verifier's rerun is evidence about another run, never a contender: every reader leaves its own run out.

The bundled registry holds real ones: the H200 reruns of the h24 FlashInfer runs, signed by the bundled
verifier key (benchmarks/RESULTS.md). Some reran faster than the run they are about, so a reader that
ranked them would show a new #1.
"""

from __future__ import annotations

import json

from kictl import standing
from kictl.store.registry import Registry
from tests.conftest import RunCli

DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"


def _digests(document: object) -> set[str]:
    text = json.dumps(document)
    return {word.strip('"') for word in text.replace(",", " ").split() if word.strip('"').startswith("sha256:")}


def test_leaderboards_and_history_leave_the_verifiers_reruns_out(cli: RunCli, bundled_results: Registry) -> None:
    reruns = standing.verifier_rerun_runs(bundled_results)
    assert len(reruns) >= 7  # one per workload at least
    commands: tuple[tuple[str, ...], ...] = (
        ("leaderboard", DEFINITION),
        ("leaderboard", DEFINITION, "--workload", "b16x_q32_kv1024"),
        ("history", DEFINITION),
    )
    for args in commands:
        result = cli(*args, "--registry", bundled_results.root, "--json")
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        if args[0] == "history":  # its entries list every record as it entered; its #1s are the ranking's
            assert _digests(document["entries"]) & reruns
            document = document["groups"]
        assert not _digests(document) & reruns, args


def test_a_verified_run_keeps_its_own_figure(cli: RunCli, bundled_results: Registry) -> None:
    """The rerun of b16x_q32_kv1024 read 63.4 µs; the board shows the submitted 64.6 µs, now verified."""
    result = cli("leaderboard", DEFINITION, "--workload", "b16x_q32_kv1024", "--registry", bundled_results.root)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    h200 = lines[next(i for i, line in enumerate(lines) if line.startswith("H200 · ")) :]  # after the H100 boards
    first = next(line for line in h200 if line.startswith("1 "))
    assert "64.6 µs" in first
    assert "verified" in first
