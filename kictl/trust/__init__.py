"""Keys, DSSE attestations, the trust root and evidence levels (docs/trust.md).

Every claim in the registry is attributable and every tampering detectable,
offline.  This module holds the four parts of that promise:

*Keys.*  Ed25519 through ``cryptography``.  A keyid is the hex SHA-256 of the
raw 32-byte public key and is always recomputed by the verifier, never taken
from an envelope.  Private keys are PKCS#8 PEM files of mode 0600, encrypted
when ``$KICTL_KEY_PASSPHRASE`` is set; public keys are SubjectPublicKeyInfo
PEM, optionally preceded by ``owner:`` and ``keyid:`` lines (RFC 7468 §5.2
allows explanatory text before the encapsulation boundary).

*Attestations.*  A DSSE envelope (DSSE envelope.md; payloadType
``application/vnd.in-toto+json``) whose payload is the JCS bytes of an in-toto
Statement v1 (in-toto attestation spec/v1/statement.md) about one record:
``subject = [{"name": "<kind>/<name>", "digest": {"sha256": <hex>}}]`` and
``predicateType = https://kernelindex.dev/attestation/<type>/v1`` with the
types ``submission``, ``rerun``, ``review`` and ``retraction``.  Signatures are
Ed25519 over the pre-authentication encoding (DSSE protocol.md, "PAE").  An
envelope about record ``<hex>`` is stored at
``registry/attestations/<hex[0:2]>/<hex>/<envelope hex>.dsse.json``, its bytes
``canon.pretty_bytes(envelope)`` and its name the SHA-256 of its JCS bytes.

*The trust root.*  ``registry/trust/root.json`` is the current version of a
versioned document ``{"signed": {...}, "signatures": [...]}`` that lists keys
(owner, roles among ``maintainer``, ``submitter``, ``verifier``, validity
window, revocation) and a maintainer threshold.  Every version is also kept as
``registry/trust/<N>.root.json``.  Root signatures are Ed25519 over
PAE(``application/vnd.kernelindex.trust-root+json``, JCS(signed)), so that a
root signature can never be replayed as an attestation or the reverse.
Rotation follows TUF (specification §5.3.4 and §5.3.5) in full: version N+1
must be exactly N+1 and be signed by a threshold of version N's maintainer
keys *and* by a threshold of its own maintainer keys, each key counted once.
The root ``kictl init`` writes has no keys; the version after it, the trust
anchor, needs only its own threshold.

*Evidence.*  Computed, never declared: ``unsigned`` without a valid
``submission`` signature by a ``submitter`` key, ``reported`` with one, unless a
``verifier`` key attests a rerun; ``verified`` when such reruns agree (verdict ``agrees`` and the
latency ratio within the policy's ``rerunTolerance``), ``disputed`` when any of
them disagreed or failed.  Community reruns (other roles) and reviews are
counted but never change the level.  A valid ``retraction`` (by a maintainer
or the record's own submitter) marks the record retracted.

Verification raises: ``verify_*`` return a value or raise ``CheckFailed``.

The package, by concern (every public name is re-exported here)::

    _common       predicate types, roles, levels, the passphrase variable
    keys          Ed25519 key files and keyids
    dsse          DSSE envelopes and PAE
    models        wire models of the root, statements and predicates
    root          the trust root: versions, rotation, ``registry/trust/``
    attestations  making, signing, storing and verifying envelopes
    evidence      judging one record: evidence level, ``kictl verify``
    bulk          resolving a reference to the record file ``kictl verify`` checks
    readers       the rules every reader applies: the signed policy, run marks

The standing of many runs at once (levels, retractions, verifier reruns, advisories, held-out verdicts)
is ``kictl.standing``'s: it calls ``judge_attestations`` here.
"""

from __future__ import annotations

from kictl.trust._common import (
    LEVELS,
    PASSPHRASE_ENV,
    PAYLOAD_TYPE,
    PREDICATE_PREFIX,
    PREDICATE_TYPES,
    REVOCATION_REASONS,
    ROLES,
    ROOT_PAYLOAD_TYPE,
    STATEMENT_TYPE,
    Level,
    Role,
    predicate_kind,
    predicate_type_uri,
    short_keyid,
)
from kictl.trust.attestations import (
    AttestationRejected,
    Signer,
    VerifiedAttestation,
    attestation_envelope,
    envelope_name,
    may_retract,
    sign_record,
    signing_warnings,
    statement_for,
    verify_attestation,
)
from kictl.trust.bulk import resolve_digest
from kictl.trust.dsse import (
    Envelope,
    EnvelopeSignature,
    pae,
    parse_envelope,
    sign_envelope,
)
from kictl.trust.evidence import (
    AttestationResult,
    RecordTrust,
    VerifyReport,
    check_record,
    check_signer_time,
    envelope_files,
    envelope_signers,
    evidence_level,
    judge_attestations,
    read_envelopes,
    record_owners,
    rerun_agrees,
    signing_times,
    submission_owners,
)
from kictl.trust.keys import (
    generate_keypair,
    keyid_of,
    load_private_key,
    load_public_key,
    public_bytes,
    public_key_owner,
    public_key_text,
)
from kictl.trust.models import (
    PREDICATE_MODELS,
    Digest,
    HexKey,
    Owner,
    RerunPredicate,
    RetractionPredicate,
    ReviewPredicate,
    Revocation,
    RootDocument,
    RootSignature,
    RootSigned,
    SubmissionPredicate,
    Text,
    TrustedKey,
    predicate_model,
)
from kictl.trust.root import (
    RootChain,
    TrustRoot,
    add_key,
    init_root,
    initial_root_document,
    load_root,
    registry_root,
    repair_root,
    revoke_key,
    root_chain,
    root_version_path,
    sign_policy,
    verify_anchor,
    verify_root_chain,
    verify_root_update,
)

__all__ = [
    "LEVELS",
    "PASSPHRASE_ENV",
    "PAYLOAD_TYPE",
    "PREDICATE_MODELS",
    "PREDICATE_PREFIX",
    "PREDICATE_TYPES",
    "REVOCATION_REASONS",
    "ROLES",
    "ROOT_PAYLOAD_TYPE",
    "STATEMENT_TYPE",
    "AttestationRejected",
    "AttestationResult",
    "Digest",
    "Envelope",
    "EnvelopeSignature",
    "HexKey",
    "Level",
    "Owner",
    "RecordTrust",
    "RerunPredicate",
    "RetractionPredicate",
    "ReviewPredicate",
    "Revocation",
    "Role",
    "RootChain",
    "RootDocument",
    "RootSignature",
    "RootSigned",
    "Signer",
    "SubmissionPredicate",
    "Text",
    "TrustRoot",
    "TrustedKey",
    "VerifiedAttestation",
    "VerifyReport",
    "add_key",
    "attestation_envelope",
    "check_record",
    "check_signer_time",
    "envelope_files",
    "envelope_name",
    "envelope_signers",
    "evidence_level",
    "generate_keypair",
    "init_root",
    "initial_root_document",
    "judge_attestations",
    "keyid_of",
    "load_private_key",
    "load_public_key",
    "load_root",
    "may_retract",
    "pae",
    "parse_envelope",
    "predicate_kind",
    "predicate_model",
    "predicate_type_uri",
    "public_bytes",
    "public_key_owner",
    "public_key_text",
    "read_envelopes",
    "record_owners",
    "registry_root",
    "repair_root",
    "rerun_agrees",
    "resolve_digest",
    "revoke_key",
    "root_chain",
    "root_version_path",
    "short_keyid",
    "sign_envelope",
    "sign_policy",
    "sign_record",
    "signing_times",
    "signing_warnings",
    "statement_for",
    "submission_owners",
    "verify_anchor",
    "verify_attestation",
    "verify_root_chain",
    "verify_root_update",
]
