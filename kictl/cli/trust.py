"""Commands on keys, signatures and the trust root: ``keygen``, ``sign``, ``verify`` and ``trust ...``.

The logic lives in ``kictl.trust``; these commands parse options, call it and
render.  Exit codes: 0 ok, 1 a check said no (a signature, a threshold, a
tampered file), 2 usage, 3 an unknown or invalid record or key, 4 registry or
I/O, 5 environment (no key, loose key permissions, wrong passphrase).
"""

from __future__ import annotations

import base64
import json
import os
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from kictl import canon, render
from kictl import trust as trust_core
from kictl.advisories.published import deletion_failures
from kictl.cli._common import (
    REFERENCE_HELP,
    JsonOption,
    RegistryOption,
    emit_json,
    err,
    guarded,
    open_registry,
    out,
    table,
)
from kictl.errors import CheckFailed, UsageError
from kictl.layout import ROOT_FILE
from kictl.records import format_timestamp, parse_timestamp
from kictl.render import terminal_width
from kictl.standing import record_marks
from kictl.store.inputs import parse_json_file
from kictl.trust.anchor import pin
from kictl.trust.reanchor import reanchor

app = typer.Typer(
    help="The trust root: keys, roles, validity and revocation (registry/trust/).",
    no_args_is_help=True,
)

WIDTH = 100

KeysOption = Annotated[
    list[Path],
    typer.Option(
        "--key",
        help="A maintainer's private key file (repeat for a threshold above 1). Passphrase from $KICTL_KEY_PASSPHRASE.",
        show_default=False,
    ),
]


def _timestamp(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment: datetime = parse_timestamp(value)
        return moment
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"{option} {value!r} is not an RFC 3339 time such as 2026-01-31T12:00:00Z") from exc
    if moment.tzinfo is None:
        raise UsageError(f"{option} {value!r} has no time zone; end it with Z")
    return moment.astimezone(UTC)


def _private_keys(paths: list[Path]) -> list[Any]:
    return [trust_core.load_private_key(path) for path in paths]


def _owner_of(path: Path, explicit: str | None = None) -> str:
    """The owner given, else the ``owner:`` line of the .pub file, else its file name without ``.pub``."""
    if explicit:
        return explicit
    return trust_core.public_key_owner(path) or path.name.removesuffix(".pub")


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    return textwrap.wrap(
        render.compact_hex(text),
        width=WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


# --------------------------------------------------------------------------- keygen


@guarded
def keygen(
    out_path: Annotated[Path, typer.Option("--out", help="Private key file to create; PATH.pub gets the public key.")],
    owner: Annotated[str | None, typer.Option("--owner", help="Who holds the key (written into PATH.pub).")] = None,
) -> None:
    """Create an Ed25519 key pair and print its keyid.

    PATH is a PEM private key of mode 0600, encrypted when $KICTL_KEY_PASSPHRASE
    is set; PATH.pub is its public key. Existing files are never overwritten.
    """
    keyid = trust_core.generate_keypair(out_path, owner=owner)
    encrypted = "encrypted" if os.environ.get(trust_core.PASSPHRASE_ENV) else "not encrypted"
    err(f"wrote {out_path} (private key, mode 0600, {encrypted}) and {out_path}.pub")
    out(keyid)


# --------------------------------------------------------------------------- sign


@guarded
def sign(
    reference: Annotated[str, typer.Argument(help=f"The record: {REFERENCE_HELP}.")],
    key: Annotated[Path, typer.Option("--key", help="Private key file to sign with.", show_default=False)],
    kind: Annotated[
        str, typer.Option("--type", help="Attestation type: submission, rerun, review or retraction.")
    ] = "submission",
    predicate: Annotated[
        Path | None,
        typer.Option(
            "--predicate",
            help="JSON file with the predicate: rerun {runDigest, ratio, verdict}, review {note}, "
            "retraction {reason}; a submission may have {note}.",
        ),
    ] = None,
    registry: RegistryOption = None,
) -> None:
    """Sign an attestation about a record and store it under registry/attestations/; print its path."""
    target = open_registry(registry)
    trust_core.predicate_type_uri(kind)
    digest = trust_core.resolve_digest(target, reference)
    value = parse_json_file(predicate) if predicate is not None else None
    if value is not None and not isinstance(value, dict):
        raise UsageError(f"{predicate}: a predicate is a JSON object")
    for warning in trust_core.signing_warnings(target, key, kind):
        err(f"warning: {warning}")
    path = trust_core.sign_record(target, digest, key, predicate_type=kind, predicate=value)
    err(f"signed a {kind} attestation about {digest}")
    out(target.relative(path))


# --------------------------------------------------------------------------- verify


def _signers(result: trust_core.AttestationResult) -> str:
    return ", ".join(f"{s.owner} ({s.keyid[:8]})" for s in result.signers) or "-"


def _detail(result: trust_core.AttestationResult) -> str:
    att = result.attestation
    if att is None or result.failure is not None:
        return ""
    predicate = att.predicate
    if isinstance(predicate, trust_core.RerunPredicate):
        ratio = "-" if predicate.ratio is None else f"{predicate.ratio:.3f}"
        scope = "counts" if result.counts_for == "evidence" else "community"
        return f"{predicate.verdict} {ratio} ({scope})"
    if isinstance(predicate, trust_core.RetractionPredicate):
        return f"reason: {predicate.reason}"
    if isinstance(predicate, trust_core.ReviewPredicate):
        return predicate.note
    return ""


def claimed_type(root: Path | None, path: str) -> str:
    """What an envelope that failed before its type was known says it is, marked unverified (never trusted).

    ``rerun (claimed)`` from the statement's ``predicateType``; ``unreadable`` where the file, its
    payload or its statement cannot be read.
    """
    if root is None:
        return "unreadable"
    try:
        envelope = json.loads((root / path).read_bytes())
        statement = json.loads(base64.b64decode(envelope["payload"], validate=False))
        uri = statement["predicateType"]
    except (OSError, ValueError, KeyError, TypeError):
        return "unreadable"
    kind = trust_core.predicate_kind(uri) if isinstance(uri, str) else None
    return f"{kind} (claimed)" if kind else "unknown type"


def attestation_lines(results: list[trust_core.AttestationResult], root: Path | None = None) -> list[str]:
    """One row per envelope: type, valid or INVALID, signers, signing time (UTC), what it says.

    A signing time marked ``*`` is now: the envelope is not committed yet.  An envelope rejected before
    its type was verified shows the type it claims, marked so (``claimed_type``), read from ``root``.
    """
    rows = []
    for result in results:
        when = format_timestamp(result.signed_at)[:16].replace("T", " ") + ("" if result.committed else "*")
        state = "valid" if result.valid else "INVALID"
        kind = result.predicate_type or claimed_type(root, result.path)
        rows.append([kind, state, _signers(result), when, _detail(result)])
    # names whole; cut only to fit a terminal (issue 30)
    width = terminal_width()
    headers = ["type", "state", "signed by", "signed (UTC)", "says"]
    lines = ["  " + line for line in table(headers, rows, cut=(2, 4), width=None if width is None else width - 2)]
    if not all(result.committed for result in results):
        lines.append("  * not committed yet: signing time is now")
    return lines


def _level_line(trust: trust_core.RecordTrust, advisories: tuple[str, ...] = ()) -> str:
    parts: list[str] = [render.with_advisories(trust.level, advisories)]
    if trust.retracted:
        parts.append("RETRACTED")
    parts.append(f"{trust.community_reruns} community rerun(s)")
    parts.append(f"{trust.reviews} review(s)")
    return " · ".join(parts)


@guarded
def verify(
    reference: Annotated[str, typer.Argument(help=f"The record: {REFERENCE_HELP}.")],
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check a record, every record it references, and every attestation about it.

    Digests are recomputed from the files; each envelope is verified against
    the trust root as of its signing time (when its file was first committed,
    or now). Prints the evidence level (unsigned, reported, verified, disputed). Exit 0
    when everything checked is intact, 1 with every failure listed otherwise.
    """
    target = open_registry(registry)
    digest = trust_core.resolve_digest(target, reference)
    report = trust_core.check_record(target, digest, registry_failures=deletion_failures)
    # an advisory's marks are shown, never a failure; a deleted advisory version is one
    marks = record_marks(target, digest)
    if as_json:
        emit_json({**report.to_json(), "advisories": marks.run_json(digest)})
    else:
        out(f"record     {report.digest}")
        out(f"kind       {report.kind}  {report.name or '?'}")
        out(f"evidence   {_level_line(report.trust, marks.of(digest))}")
        root = f"trust root version {report.root_version}" if report.root_version else "trust root invalid"
        out(f"checked    {len(report.records)} record(s), {len(report.blobs)} blob(s); {root}")
        if report.anchor is not None:
            out(f"anchor     {report.anchor}")
        if report.attestations:
            out(f"attestations ({len(report.attestations)})")
            for line in attestation_lines(report.attestations, target.root):
                out(line)
        for note in report.notes:
            out(f"note       {note}")
        if report.failures:
            out(f"failures ({len(report.failures)})")
            for failure in report.failures:
                for line in _wrapped(failure):
                    out(line)
    if not report.ok:
        raise CheckFailed(f"{len(report.failures)} failure(s) verifying {digest}")
    err(f"ok: {len(report.records)} record(s) and {len(report.attestations)} attestation(s) intact")


# --------------------------------------------------------------------------- trust ...


def _status(key: trust_core.TrustedKey, now: datetime) -> str:
    if key.revoked is not None:
        return f"{key.revoked.reason} {key.revoked.at[:10]}"
    if key.not_after is not None and parse_timestamp(key.not_after) <= now:
        return "expired"
    if parse_timestamp(key.not_before) > now:
        return "not yet valid"
    return "active"


def _root_lines(root: trust_core.TrustRoot) -> list[str]:
    now = datetime.now(UTC)
    lines = [
        f"trust root version {root.version}: {len(root.keys)} key(s), "
        f"threshold {root.threshold} of {len(root.maintainers())} maintainer(s)"
    ]
    if not root.keys:
        lines.append("no keys: nothing is trusted yet (start with `kictl trust init`)")
        return lines
    rows = []
    for keyid, key in sorted(root.keys.items(), key=lambda item: (item[1].owner, item[0])):
        valid = key.not_before[:10] + ".." + (key.not_after[:10] if key.not_after else "")
        rows.append([keyid[:12], key.owner, ",".join(key.roles), valid, _status(key, now)])
    lines.extend(table(["keyid", "owner", "roles", "valid", "status"], rows))
    return lines


def _key_json(keyid: str, key: trust_core.TrustedKey, now: datetime) -> dict[str, Any]:
    document = key.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"keyid": keyid, **document, "status": _status(key, now)}


def _root_json(root: trust_core.TrustRoot) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "version": root.version,
        "threshold": root.threshold,
        "keys": [_key_json(keyid, key, now) for keyid, key in sorted(root.keys.items())],
    }


def _published(root: trust_core.TrustRoot, what: str) -> None:
    err(f"{what}: published trust root version {root.version} (commit registry/trust/ to make it count)")
    for line in _root_lines(root):
        out(line)


@app.command("init")
@guarded
def trust_init(
    keys: KeysOption,
    maintainers: Annotated[
        list[Path] | None,
        typer.Option(
            "--maintainer",
            help="A maintainer's public key (.pub); repeatable. The --key holders are maintainers too. "
            "The owner is the .pub file's owner: line, else its name.",
            metavar="PUB",
        ),
    ] = None,
    threshold: Annotated[int, typer.Option("--threshold", help="Maintainer signatures a change needs.")] = 1,
    not_before: Annotated[
        str | None, typer.Option("--not-before", help="The maintainers' keys are valid from (RFC 3339; default now).")
    ] = None,
    registry: RegistryOption = None,
) -> None:
    """Write the first trust root with keys (the trust anchor), signed by its maintainers."""
    target = open_registry(registry)
    private = _private_keys(keys)
    listed = []
    for path in maintainers or []:
        listed.append((trust_core.load_public_key(path), _owner_of(path)))
    known = {trust_core.keyid_of(public) for public, _ in listed}
    for path, key in zip(keys, private, strict=True):
        if trust_core.keyid_of(key.public_key()) not in known:
            pub = path.with_name(path.name + ".pub")
            owner = _owner_of(pub) if pub.exists() else path.name
            listed.append((key.public_key(), owner))
            known.add(trust_core.keyid_of(key.public_key()))
    root = trust_core.init_root(
        target,
        maintainers=listed,
        keys=private,
        threshold=threshold,
        not_before=_timestamp(not_before, "--not-before"),
    )
    _published(root, "initialised")


@app.command("add-key")
@guarded
def trust_add_key(
    public_key: Annotated[Path, typer.Argument(help="The new key's public key file (.pub).")],
    roles: Annotated[
        list[str],
        typer.Option(
            "--role", help="maintainer, submitter or verifier; repeatable.", metavar="ROLE", show_default=False
        ),
    ],
    keys: KeysOption,
    owner: Annotated[
        str | None, typer.Option("--owner", help="Who holds the key (default: the .pub file's owner: line).")
    ] = None,
    not_before: Annotated[str | None, typer.Option("--not-before", help="Valid from (RFC 3339; default now).")] = None,
    not_after: Annotated[str | None, typer.Option("--not-after", help="Valid until (RFC 3339).")] = None,
    threshold: Annotated[
        int | None, typer.Option("--threshold", help="Change the maintainer threshold in the same version.")
    ] = None,
    registry: RegistryOption = None,
) -> None:
    """Add a key to the trust root: a new version signed by a threshold of maintainers."""
    target = open_registry(registry)
    root = trust_core.add_key(
        target,
        trust_core.load_public_key(public_key),
        owner=_owner_of(public_key, owner),
        roles=roles,
        keys=_private_keys(keys),
        not_before=_timestamp(not_before, "--not-before"),
        not_after=_timestamp(not_after, "--not-after"),
        threshold=threshold,
    )
    _published(root, "added a key")


@app.command("revoke")
@guarded
def trust_revoke(
    keyid: Annotated[str, typer.Argument(help="The key to revoke: its keyid or a unique prefix of 8+ hex digits.")],
    reason: Annotated[
        str,
        typer.Option(
            "--reason",
            help="retired: signatures made before --at stay valid; compromised: none of its signatures count.",
            show_default=False,
        ),
    ],
    keys: KeysOption,
    at: Annotated[str | None, typer.Option("--at", help="When it stops being valid (RFC 3339; default now).")] = None,
    registry: RegistryOption = None,
) -> None:
    """Revoke a key: a new trust root version signed by a threshold of maintainers."""
    target = open_registry(registry)
    root = trust_core.revoke_key(target, keyid, reason=reason, keys=_private_keys(keys), at=_timestamp(at, "--at"))
    _published(root, f"revoked {keyid} ({reason})")


@app.command("sign-policy")
@guarded
def trust_sign_policy(keys: KeysOption, registry: RegistryOption = None) -> None:
    """Sign registry/policy.json: a new trust root version naming its sha256, signed by a threshold of maintainers.

    A pull request that changes the policy needs it (`kictl review` lints it otherwise).
    """
    target = open_registry(registry)
    root = trust_core.sign_policy(target, keys=_private_keys(keys))
    _published(root, f"signed the policy {root.document.signed.policy_digest}")


@app.command("reanchor")
@guarded
def trust_reanchor(
    maintainers: Annotated[
        list[Path],
        typer.Option(
            "--maintainer",
            help="A new maintainer's public key (.pub); repeatable. The owner is its owner: line, else its name.",
            metavar="PUB",
            show_default=False,
        ),
    ],
    keys: KeysOption,
    threshold: Annotated[int, typer.Option("--threshold", help="Maintainer signatures a change needs.")] = 1,
    reason: Annotated[
        str,
        typer.Option(
            "--reason",
            help="What happened to the old maintainer keys: retired (lost; their past signatures stay valid) "
            "or compromised (none of their signatures count).",
        ),
    ] = "retired",
    verifiers: Annotated[
        list[Path] | None,
        typer.Option("--verifier", help="Add a verifier's public key in the same version; repeatable.", metavar="PUB"),
    ] = None,
    submitters: Annotated[
        list[Path] | None,
        typer.Option(
            "--submitter", help="Add a submitter's public key in the same version; repeatable.", metavar="PUB"
        ),
    ] = None,
    retire: Annotated[
        list[str] | None,
        typer.Option(
            "--retire",
            help="Also revoke this listed key (keyid, 12+ hex digits; for --reason), e.g. a verifier whose private "
            "key went with the maintainers'; repeatable.",
            metavar="KEYID",
        ),
    ] = None,
    sign_policy: Annotated[
        bool, typer.Option("--sign-policy", help="Name registry/policy.json's sha256 in the same version.")
    ] = False,
    registry: RegistryOption = None,
) -> None:
    """Re-anchor: the next trust root version signed by new maintainers only (the old keys are lost or stolen).

    Readers accept it only once they pin it (`kictl trust pin`, or a kictl release that pins it).
    `kictl review` fails it: a maintainer merges it out of band (docs/trust.md, "Re-anchoring").
    """
    target = open_registry(registry)
    root = reanchor(
        target,
        maintainers=[(trust_core.load_public_key(path), _owner_of(path)) for path in maintainers],
        keys=_private_keys(keys),
        threshold=threshold,
        reason=reason,
        others=[
            *((trust_core.load_public_key(path), _owner_of(path), ("verifier",)) for path in verifiers or ()),
            *((trust_core.load_public_key(path), _owner_of(path), ("submitter",)) for path in submitters or ()),
        ],
        retire=retire or (),
        sign_policy=sign_policy,
    )
    _published(root, "re-anchored")
    err(f"readers pin it with: kictl trust pin {canon.DIGEST_PREFIX}{canon.sha256_hex(root.data)}")


@app.command("verify")
@guarded
def trust_verify(registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """Verify the chain of trust root versions in registry/trust/ (TUF-style rotation)."""
    target = open_registry(registry)
    try:
        chain = trust_core.root_chain(target)
    except CheckFailed as exc:
        if as_json:
            emit_json({"ok": False, "failures": [exc.message, *exc.details]})
        raise
    if as_json:
        emit_json(chain.to_json())
    else:
        for version, path in chain.files:
            out(f"version {version}  {path}")
        out(f"anchor     {chain.anchor.describe() if chain.anchor else 'none pinned (see `kictl trust pin`)'}")
        out(f"ok: {len(chain.files)} version(s); the current root is version {chain.root.version}")


@app.command("repair")
@guarded
def trust_repair(registry: RegistryOption = None) -> None:
    """Finish a trust-root write that was killed between its two files, and remove kictl's temporary files.

    Needed when `trust verify` says a trust-root write was interrupted; the chain must verify up to the
    newest version file (docs/trust.md, "Interrupted writes").
    """
    target = open_registry(registry)
    root, rewrote, removed = trust_core.repair_root(target)
    if removed:
        err(f"removed {removed} temporary file(s) a killed writer left")
    what = f"wrote {ROOT_FILE} as version {root.version}" if rewrote else "nothing to finish"
    err(f"repaired: {what}; the current root is version {root.version}")


@app.command("pin")
@guarded
def trust_pin(
    digest: Annotated[str, typer.Argument(help="sha256:<64 hex> of the trust-root version file you trust.")],
) -> None:
    """Pin a trust-root version as an anchor in your config (docs/trust.md, "The anchor").

    `kictl verify` then accepts a registry whose chain contains this version,
    verifying from it upwards. Get the digest from someone you trust, not from
    the registry you are about to check: `sha256sum registry/trust/<N>.root.json`.
    """
    path = pin(digest)
    err(f"pinned {digest} in {path}")


@app.command("show")
@guarded
def trust_show(registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """Show the current trust root: keys, owners, roles, validity and revocations."""
    target = open_registry(registry)
    root = trust_core.registry_root(target)
    if as_json:
        emit_json(_root_json(root))
        return
    for line in _root_lines(root):
        out(line)


def register(root_app: typer.Typer) -> None:
    root_app.command()(keygen)
    root_app.command()(sign)
    root_app.command()(verify)
    root_app.add_typer(app, name="trust")
