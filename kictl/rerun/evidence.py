"""Which BenchmarkRuns are verifiers' reruns of other runs (DESIGN §5, §6, §10).

A rerun's own BenchmarkRun is evidence about another run, not a submission:
nobody signs a ``submission`` for it, and a leaderboard that ranked it would
show it (``reported``) beside, or instead of, the run it verified.
``verifier_reruns`` finds them the only trustworthy way, from the
attestations: every ``rerun`` attestation that verifies against the trust
root, by a key with the ``verifier`` role, names its run in ``runDigest``.
A label in a record's metadata would not do: metadata is not signed.

It returns ``{rerun run digest: (original digests)}``, for ranking and review
to set those runs apart.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from kictl import canon, trust
from kictl.errors import KictlError
from kictl.store import Registry
from kictl.trust.readers import reader_policy


def verifier_reruns(registry: Registry) -> dict[str, tuple[str, ...]]:
    """Every run that a valid ``rerun`` attestation by a verifier names, with the runs it reran.

    Envelopes that do not verify are ignored (``kictl verify`` reports them).
    Raises ``CheckFailed`` when the trust root chain does not verify.
    """
    top = registry.attestations_dir
    if not top.is_dir():
        return {}
    folders = [
        (canon.DIGEST_PREFIX + folder.name, folder.path)
        for shard in os.scandir(top)
        if shard.is_dir()
        for folder in os.scandir(shard.path)
        if folder.is_dir() and canon.is_hex_digest(folder.name)
    ]
    if not folders:
        return {}
    root = trust.registry_root(registry)
    tolerance = reader_policy(registry).rerun_tolerance
    times = trust.signing_times(registry)
    now = datetime.now(UTC).replace(microsecond=0)
    found: dict[str, list[str]] = {}
    for digest, folder in sorted(folders):
        envelopes = []
        for entry in sorted(os.scandir(folder), key=lambda item: item.name):
            if not entry.is_file():
                continue
            relative = registry.relative(Path(entry.path))
            try:
                data = Path(entry.path).read_bytes()
            except OSError:
                continue
            envelopes.append((relative, data, times.get(relative, now), relative in times))
        if not envelopes:
            continue
        try:
            subject = registry.load(digest)
        except KictlError:
            continue
        results, _ = trust.judge_attestations(subject, root, envelopes, rerun_tolerance=tolerance)
        for result in results:
            att = result.attestation
            if result.counts_for == "evidence" and att is not None:
                assert isinstance(att.predicate, trust.RerunPredicate)
                found.setdefault(att.predicate.run_digest, []).append(digest)
    return {run: tuple(sorted(set(originals))) for run, originals in found.items()}
