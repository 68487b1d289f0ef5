"""Review of a registry pull request: what changed, which lints fail it, which hints advise (docs/review.md).

``review(registry, base, head)`` compares the head revision with the merge
base of ``base`` and ``head`` and judges the files that changed, never the
whole registry, as the conda-forge staged-recipes linter and MLPerf's
submission checker do: *lints* fail the review (exit 1), *hints* advise the
maintainer.  Everything is read from git objects (``GitHistory.read_files``,
one pass per folder), never from the working tree (the leaderboards come
from the query index's snapshots of the two revisions; the index itself is
the cache under ``.kictl/``), and nothing from the pull request is executed:
a definition's reference is parsed (``ast``), not run.

Lints (issue 7):

* ``path-not-allowed``: a file outside ``registry/`` and ``definitions/``, or
  inside them but outside the layout of docs/records.md.  A pull request touching
  neither folder is a code-only PR: the review says so and passes.
* ``published-changed``: a published record, blob, attestation or trust-root
  version edited or deleted (the registry is append-only, docs/records.md).
* ``bad-name-or-form``: a file name that is not its digest, a record in the
  wrong kind folder, bytes not in normal form (``validate.check_*_file``).
* ``schema``: a record, policy or definition folder that does not parse or validate.
* ``dangling-reference``: a reference to a record (or blob) that neither the
  base nor the head has; an attestation about no record.
* ``definition-in-place`` / ``definition-not-compiled``: a definition folder
  that compiles to a record this PR does not add (a changed definition is a new
  record with a new digest; the old one stays).
* ``below-floor``: a passed run faster than its physical floor (docs/leaderboards.md),
  from ``kictl.families``.
* ``unsigned-run``, ``bad-attestation``, ``trust-root-threshold``: signatures
  and the trust root (docs/trust.md), through the trust seam below.
* ``bad-advisory``: a harness advisory version that does not verify against
  the base's trust root (``kictl.advisories.review``, docs/advisories.md).

Hints: ``new-first``, ``rank-change``, ``rerun-suggested`` and ``stale-group``
through the leaderboard seam; ``source-native-no-rerun``,
``definition-new-version`` and ``policy-changed`` directly.

Seams.  Signature verification belongs to ``kictl.trust`` and ranking to
``kictl.rank``; review calls them through ``Checks``, three optional
functions.  A check whose function is absent (or fails) is reported under
"not checked" with the reason, never silently passed.  ``default_checks``
fills them: ``verify_with_trust`` (``trust.verify_attestation`` against the
base's trust root), ``verify_root_update_with_trust`` and
``leaderboards_with_rank`` (``rank.diff_states`` and ``rank.stale_groups``
over snapshots of the query index of both revisions, with evidence levels
from ``HeadEvidence``: the head's rerun attestations judged by the base's root).

Rendering.  ``render_text`` (100 columns), ``render_markdown`` (a PR comment:
a summary line, lints first, one table per comparison group, at most
``MARKDOWN_LIMIT`` characters with the overflow summarised) and
``ReviewReport.to_json``.

The package, by concern (every public name is re-exported here)::

    _common   lint and hint codes, limits
    model     findings and the results behind the seams; ``Checks``
    seams     the default modules behind the seams (trust, evidence, rank)
    report    ``ReviewReport`` and its ``--json`` document
    revision  reading files of a git revision
    state     the state of a running review
    files     checks of each changed file
    runs      checks of the new runs and the leaderboards they move
    engine    ``review()``: the steps in order
    text      the report as terminal text and as a Markdown PR comment
"""

from __future__ import annotations

from kictl.review._common import (
    HINTS,
    LINTS,
    MARKDOWN_LIMIT,
    PREDICATE_PREFIX,
    PREDICATE_SUFFIX,
    RERUN_MARGIN,
)
from kictl.review.engine import review
from kictl.review.model import (
    AttestationVerdict,
    Checks,
    Finding,
    GroupDiff,
    LeaderboardDiff,
    Leaderboards,
    Move,
    NotChecked,
    StaleGroup,
    Standing,
    VerifyAttestation,
    VerifyRootUpdate,
)
from kictl.review.report import ReviewReport
from kictl.review.revision import claimed_predicate_type, read_paths, record_path_digest
from kictl.review.seams import (
    HeadEvidence,
    default_checks,
    leaderboards_with_rank,
    verify_root_update_with_trust,
    verify_with_trust,
)
from kictl.review.text import (
    md_code,
    md_text,
    render_markdown,
    render_text,
)

__all__ = [
    "HINTS",
    "LINTS",
    "MARKDOWN_LIMIT",
    "PREDICATE_PREFIX",
    "PREDICATE_SUFFIX",
    "RERUN_MARGIN",
    "AttestationVerdict",
    "Checks",
    "Finding",
    "GroupDiff",
    "HeadEvidence",
    "LeaderboardDiff",
    "Leaderboards",
    "Move",
    "NotChecked",
    "ReviewReport",
    "StaleGroup",
    "Standing",
    "VerifyAttestation",
    "VerifyRootUpdate",
    "claimed_predicate_type",
    "default_checks",
    "leaderboards_with_rank",
    "md_code",
    "md_text",
    "read_paths",
    "record_path_digest",
    "render_markdown",
    "render_text",
    "review",
    "verify_root_update_with_trust",
    "verify_with_trust",
]
