"""Harness advisories (DESIGN §13, docs/advisories.md): when a hole in the harness is found, which published
results it touches.

An advisory is a document signed by a maintainer key of the trust root and
kept under ``registry/advisories/<ID>/<version>.dsse.json``.  It names the
harness versions (or commits), timers, devices and isolation it affects, the
class of exploit, the version that fixed it and the exploit-corpus entries
that demonstrate it.  Readers (``leaderboard``, ``verify``, ``show``,
``cite``, the site, ``--json``) mark every run whose protocol matches; the
policy's ``advisedRuns`` decides whether marked runs rank, rank apart or drop
out; a controlled rerun by an unaffected harness clears the mark for its run.

Why its own signed document and not a seventh record kind: a record is
immutable and names a measurement by digest, while an advisory names a range
of harness builds and must be updated by its maintainers (withdrawn, its range
corrected); and its authority is a maintainer's signature, not a submission.
So it is kept like the trust root, versioned, each version signed.

The package, by concern::

    document   the advisory's schema and which protocols it matches
    published  signing, verifying against the trust root, the registry's set
    marks      the rules: which runs an advisory marks, which reruns clear a mark, the policy's modes
    memory     the versions a copy deleted: git history, this machine's memory, the warnings

Which runs of a registry are marked now (the rules applied, reruns judged) is ``kictl.standing``'s
(``run_marks``, ``record_marks``, ``affected_runs``).

Import each name from its module (issue 44): the package re-exports none of them.
"""
