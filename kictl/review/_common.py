"""Constants shared by the modules of ``kictl.review``."""

from __future__ import annotations

import re

from kictl import definitions

#: A PR comment holds at most 65,536 characters; the review keeps a margin.
MARKDOWN_LIMIT = 60_000
#: A new #1 more than this much faster than a verified previous #1 deserves a rerun (issue 7).
RERUN_MARGIN = 0.20
#: ``https://kernelindex.dev/attestation/<type>/v1`` (docs/trust.md).
PREDICATE_PREFIX = "https://kernelindex.dev/attestation/"
PREDICATE_SUFFIX = "/v1"

#: Lint codes and what each means; every one fails the review.
LINTS: dict[str, str] = {
    "path-not-allowed": "a file outside registry/ and definitions/, or outside their layout",
    "published-changed": "a published record, blob, attestation or trust-root version edited or deleted",
    "bad-name-or-form": "a file name that is not its digest, or bytes not in normal form",
    "schema": "a record, policy or definition folder that does not validate",
    "dangling-reference": "a reference to a record or blob that neither base nor head has",
    "definition-in-place": "a definition changed in place: its new record is not added",
    "definition-not-compiled": "a new definition folder whose records are not added",
    "below-floor": "a run faster than its physical floor",
    "no-floor": "a passed run whose physical floor cannot be computed, so its speed cannot be checked",
    "unknown-gpu": "a passed GPU run on a product without datasheet figures: no floor can check it",
    "name-taken": "a new Implementation, Definition or GPU product whose folded name another record holds",
    "energy-out-of-bounds": "an energy run below its energy floor, not above idle, or above power limit × time per "
    "call (issues 31, 41)",
    "timing-contradicts-samples": "a run whose stated latency statistic is not what its own kept samples give "
    "(beyond an integer rounding)",
    "energy-contradicts-trials": "an energy run whose stated figures are not what its trials' watts × time give, "
    "or whose joules per call is not its average power × time per call",
    "inconsistent-run": "a run whose implementation or workload belongs to another definition, "
    "or whose workload's axes do not fit its definition",
    "looser-than-contract": "a passed run judged at a looser tolerance than its definition's precision contract",
    "unsigned-run": "a new run without a valid submission attestation by a submitter key",
    "bad-attestation": "an attestation that does not verify (signature, key validity at the time, role)",
    "policy-unsigned": "a registry policy change that no new trust-root version signs (its policyDigest)",
    "trust-root-threshold": "a trust-root change without the previous version's maintainer threshold, "
    "or whose versions are not kept in order",
    "private-key": "a file that holds a private key (kictl.keyscan: a PEM private-key block or an Ed25519 PKCS#8 body)",
    "bad-advisory": "a harness advisory version that does not verify: unsigned or not by a maintainer key, "
    "malformed, or out of order (docs/advisories.md)",
}
#: Hint codes; they advise and never fail the review.
HINTS: dict[str, str] = {
    "new-first": "a new #1 in a comparison group",
    "rank-change": "ranks change in a comparison group, its #1 stays",
    "rerun-suggested": "a new #1 more than 20% ahead of a verified record",
    "stale-group": "a comparison group whose #1 is stale, which the submitter could refresh",
    "source-native-no-rerun": "a run imported from another harness with no rerun attestation",
    "definition-new-version": "a definition gets a new record; older runs stay with the old one",
    "policy-changed": "the registry policy changes",
    "advised-run": "a new run measured by a harness that an open advisory of the base names",
}

_DEFINITION_FILES = (definitions.DEFINITION_FILE, definitions.REFERENCE_FILE, definitions.WORKLOADS_FILE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
