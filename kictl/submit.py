"""Sending results to the registry as a pull-request branch: ``kictl submit`` (issue 6, docs/submitting.md).

A kernel author has records on disk (single files, JSON lists, manifests, or
the ``--out`` folder of ``kictl bench``) and a submitter key listed in the
registry's trust root.  ``submit`` checks the records, adds the new ones to
the registry, signs each new BenchmarkRun with a ``submission`` attestation
(docs/trust.md, ``trust.sign_record``), and makes **one commit on a new branch**
(default ``submit/<first 12 hex digits of the first new run>``) whose message
lists the runs.  The commit is built in a temporary git index
(``GitHistory.commit_on_new_branch``): the current branch, HEAD, the index and
the working tree end exactly as they were, so the author's checkout never
moves and the records live on the new branch only, ready for ``git push`` and
a pull request that ``kictl review`` then judges (docs/review.md).

Everything that can be checked is checked before anything is written:

* the registry is a git repository with a commit and a clean working tree
  (no changed, staged or untracked files): a submission is made against what
  the registry's history holds, so that references resolved here also resolve
  in the pull request.  A dirty tree is ``RegistryError`` (exit 4): it is a
  state of the registry's repository that blocks the operation, not a verdict
  on the records;
* the records validate (``store.read_record_inputs``), a digest does not
  appear twice with different metadata, every reference of a new record names
  a record of the right kind that is in the input or in the registry, every
  blob a new workload names is in the registry, and a new run's workload and
  implementation belong to its definition: otherwise ``RecordError`` (exit 3),
  since a submission must be complete;
* the key: a key file that is missing, readable by others, encrypted without
  ``$KICTL_KEY_PASSPHRASE`` or not Ed25519 is ``EnvError`` (exit 5, as in
  ``kictl sign``); a usable key that the trust root does not authorise to sign
  submissions now (not listed, no ``submitter`` role, not yet valid, expired,
  revoked) is ``CheckFailed`` (exit 1, as ``kictl verify`` would judge the
  attestation).  The check verifies real envelopes signed in memory with
  ``trust.verify_attestation``, so it is exactly the verifier's check;
* the branch name is valid and does not exist (``UsageError``, exit 2: choose
  another ``--branch``); a ``--push`` target is a configured remote, a URL or
  a path.

Nothing new to submit (every record already in the registry) is
``CheckFailed`` (exit 1): no branch is made, so a script that would push it
next must stop, as with ``git commit`` when there is nothing to commit.

Then the writes happen in one ``store.Transaction``.  On any failure after
that (a record whose published file holds other bytes, a signing error, git
refusing the commit, the local review finding lints, the push being
rejected) the transaction is rolled back, the folders it created are
removed, and the branch, if it was made, is deleted, so nothing is left
behind.  A detached HEAD is accepted: the branch starts at its commit.

The local review runs through ``local_review``, the seam to ``kictl review``.

Its size (over 600 lines) is one transaction, from checking the records to a signed branch, which must leave
the registry as it was at any failure.
"""

from __future__ import annotations

import contextlib
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kictl import canon, render, trust
from kictl.errors import CheckFailed, EnvError, KictlError, RecordError, RegistryError, UsageError
from kictl.records import KINDS, StoredRecord
from kictl.review import review
from kictl.store.files import Transaction
from kictl.store.git import GitHistory
from kictl.store.registry import Registry

BRANCH_PREFIX = "submit/"
SHORT = 12

#: The one latency formatter (``kictl.render.latency``), under the name this module has always exported.
latency_text = render.latency


# --------------------------------------------------------------------------- the review seam


@dataclass(frozen=True, slots=True)
class LocalReview:
    """What the local review said about the submission's commit."""

    ran: bool
    ok: bool
    summary: str
    lints: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"ran": self.ran, "ok": self.ok, "summary": self.summary, "lints": list(self.lints)}


#: ``(registry, base commit, head commit) -> LocalReview``.
ReviewFunction = Callable[[Registry, str, str], LocalReview]


def local_review(registry: Registry, base: str, head: str) -> LocalReview:
    """Run the review checks of a registry pull request (docs/review.md) on the submission's commit.

    ``head`` is the new branch's commit and ``base`` the commit it starts
    from.  A review that is not ``ok`` makes ``submit`` undo everything (exit 1).
    Raises what the review raises (``RegistryError`` when git fails).
    """
    report = review(registry, base, head)
    return LocalReview(
        ran=True,
        ok=report.ok,
        summary=report.summary(),
        lints=tuple(f"{f.path}: {f.message}" if f.path else f.message for f in report.lints),
    )


# --------------------------------------------------------------------------- checking the records


@dataclass(frozen=True, slots=True)
class RunLine:
    """One submitted run as the commit message and the output list it."""

    digest: str
    name: str
    definition: str
    workload: str
    implementation: str
    gpu: str
    status: str
    statistic: str | None
    latency_ns: int | None

    def latency_text(self) -> str:
        """``1.20 ms median``, or the status of a run that did not pass."""
        if self.latency_ns is None or self.statistic is None:
            return self.status
        text = f"{latency_text(self.latency_ns)} {self.statistic}"
        return text if self.status == "passed" else f"{text} ({self.status})"

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "name": self.name,
            "definition": self.definition,
            "workload": self.workload,
            "implementation": self.implementation,
            "gpu": self.gpu,
            "status": self.status,
            "primaryStatistic": self.statistic,
            "latencyNs": self.latency_ns,
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """The checked input: every distinct record, which are new, and the new runs."""

    records: tuple[StoredRecord, ...]
    new: tuple[StoredRecord, ...]
    present: tuple[StoredRecord, ...]
    runs: tuple[RunLine, ...]

    @property
    def new_runs(self) -> tuple[StoredRecord, ...]:
        return tuple(record for record in self.new if record.kind == "BenchmarkRun")


def _label(record: StoredRecord) -> str:
    return f"{record.kind} {record.name} ({record.digest[: len(canon.DIGEST_PREFIX) + SHORT]})"


class _Lookup:
    """Records by digest: the input first, then the registry (read once each)."""

    def __init__(self, registry: Registry, records: Iterable[StoredRecord]) -> None:
        self.registry = registry
        self.found: dict[str, StoredRecord | None] = {record.digest: record for record in records}

    def kind(self, digest: str) -> str | None:
        record = self.found.get(digest)
        if record is not None:
            return record.kind
        return self.registry.digest_kind(digest)

    def get(self, digest: str) -> StoredRecord | None:
        if digest not in self.found:
            try:
                self.found[digest] = self.registry.load(digest)
            except KictlError:
                self.found[digest] = None
        return self.found[digest]


def _distinct(records: Sequence[StoredRecord]) -> tuple[list[StoredRecord], list[str]]:
    unique: dict[str, StoredRecord] = {}
    problems = []
    for record in records:
        seen = unique.get(record.digest)
        if seen is None:
            unique[record.digest] = record
        elif canon.pretty_bytes(seen.raw) != canon.pretty_bytes(record.raw):
            problems.append(f"{_label(record)}: given twice with different metadata")
    return list(unique.values()), problems


def _reference_problems(record: StoredRecord, lookup: _Lookup) -> list[str]:
    problems = []
    for member, digest, kind in record.references():
        actual = lookup.kind(digest)
        if actual is None:
            problems.append(f"{_label(record)}: $.spec.{member}: {digest} is neither in the input nor in the registry")
        elif actual != kind:
            problems.append(f"{_label(record)}: $.spec.{member}: {digest} is a {actual}, not a {kind}")
    for input_name, blob in record.blob_references():
        if not lookup.registry.blob_path(blob).is_file():
            problems.append(f"{_label(record)}: $.spec.inputs.{input_name}.digest: no blob {blob} in the registry")
    return problems


def _run_line(run: StoredRecord, lookup: _Lookup) -> tuple[RunLine, list[str]]:
    """The run's summary, and the problems of a run whose parts belong to different definitions."""
    spec = run.raw["spec"]
    workload = lookup.get(spec["workloadDigest"])
    implementation = lookup.get(spec["implementationDigest"])
    environment = lookup.get(spec["environmentDigest"])
    claims = {
        "the run": spec.get("definitionDigest"),
        "its workload": workload.raw["spec"].get("definitionDigest") if workload else None,
        "its implementation": implementation.raw["spec"].get("definitionDigest") if implementation else None,
    }
    stated = {who: digest for who, digest in claims.items() if isinstance(digest, str)}
    problems = []
    if len(set(stated.values())) > 1:
        parts = ", ".join(f"{who} names {digest[: len(canon.DIGEST_PREFIX) + SHORT]}" for who, digest in stated.items())
        problems.append(f"{_label(run)}: its parts belong to different definitions ({parts})")
    definition_digest = next(iter(stated.values()), None)
    definition = lookup.get(definition_digest) if definition_digest else None
    timing = spec.get("timing") or {}
    statistic = timing.get("primaryStatistic")
    latency = (timing.get("latencyNs") or {}).get(statistic) if statistic else None
    line = RunLine(
        digest=run.digest,
        name=run.name,
        definition=str(definition.raw["spec"]["name"]) if definition else "?",
        workload=workload.name if workload else "?",
        implementation=str(implementation.raw["spec"]["name"]) if implementation else "?",
        gpu=str(environment.raw["spec"]["hardware"]["product"]) if environment else "?",
        status=str(spec["status"]),
        statistic=statistic if isinstance(statistic, str) else None,
        latency_ns=latency if isinstance(latency, int) else None,
    )
    return line, problems


def plan_submission(registry: Registry, records: Sequence[StoredRecord]) -> Plan:
    """Check that ``records`` make a complete submission and say which of them are new.

    A record is new when the registry has no file with its digest.  Raises
    ``RecordError`` (exit 3) listing every problem: a digest given twice
    with different metadata, a reference of a new record to a record that is
    in neither the input nor the registry or is of the wrong kind, a blob
    that is not in the registry, a new run whose workload or implementation
    belongs to another definition.
    """
    distinct, problems = _distinct(records)
    lookup = _Lookup(registry, distinct)
    new = [record for record in distinct if not registry.has_record(record.digest)]
    present = [record for record in distinct if registry.has_record(record.digest)]
    for record in new:
        problems.extend(_reference_problems(record, lookup))
    lines = []
    if not problems:
        for record in new:
            if record.kind == "BenchmarkRun":
                line, found = _run_line(record, lookup)
                lines.append(line)
                problems.extend(found)
    if problems:
        raise RecordError(
            f"the records do not make a complete submission ({len(problems)} problem(s)); nothing was written",
            details=problems,
        )
    return Plan(records=tuple(distinct), new=tuple(new), present=tuple(present), runs=tuple(lines))


# --------------------------------------------------------------------------- checking the key


def check_submitter(registry: Registry, key_path: Path, subjects: Sequence[StoredRecord]) -> trust.Signer:
    """The trust root's entry for the key at ``key_path``, if it may sign submissions about ``subjects`` now.

    Each subject gets a submission envelope signed in memory and verified
    with ``trust.verify_attestation`` against the registry's verified trust
    root at the present time: the verifier's own check, before anything is
    written.  Raises ``EnvError`` (exit 5) for an unusable key file and
    ``CheckFailed`` (exit 1) for a broken trust-root chain or a key the trust
    root does not authorise (unknown, no submitter role, not valid now).
    """
    key = trust.load_private_key(key_path)
    keyid = trust.keyid_of(key.public_key())
    root = trust.registry_root(registry)
    who = f"key {keyid[:SHORT]} ({key_path})"
    if root.empty:
        raise CheckFailed(
            f"{who} cannot sign submissions: the trust root lists no keys yet; a maintainer runs "
            "`kictl trust init` and adds your key with `kictl trust add-key KEY.pub --role submitter`"
        )
    if keyid not in root.keys:
        raise CheckFailed(
            f"{who} is not in the trust root (version {root.version}); the review would reject its "
            "submissions: ask a maintainer to run `kictl trust add-key KEY.pub --role submitter`"
        )
    now = datetime.now(UTC).replace(microsecond=0)
    signer: trust.Signer | None = None
    for subject in subjects:
        envelope = trust.attestation_envelope(subject, key, predicate_type="submission")
        try:
            verified = trust.verify_attestation(
                canon.canonical_bytes(envelope), subject=subject, root=root, signed_at=now
            )
        except CheckFailed as exc:
            owner = root.keys[keyid].owner
            raise CheckFailed(
                f"key {keyid[:SHORT]} ({owner}) cannot sign submissions now: {exc.message}", details=exc.details
            ) from exc
        signer = verified.signers[0]
    if signer is None:
        entry = root.keys[keyid]
        signer = trust.Signer(keyid=keyid, owner=entry.owner, roles=entry.roles)
    return signer


# --------------------------------------------------------------------------- the commit message


def _some(names: Iterable[str], limit: int = 2) -> str:
    ordered = list(dict.fromkeys(names))
    shown = ", ".join(ordered[:limit])
    return shown if len(ordered) <= limit else f"{shown} and {len(ordered) - limit} more"


def count_kinds(kinds: Iterable[str]) -> str:
    """``1 Definition, 2 BenchmarkRun``: how many of each kind, in the order of ``records.KINDS``."""
    counted = Counter(kinds)
    order = [*KINDS, *sorted(set(counted) - set(KINDS))]
    return ", ".join(f"{counted[kind]} {kind}" for kind in order if counted[kind])


def _counts(records: Iterable[StoredRecord]) -> str:
    return count_kinds(record.kind for record in records)


def default_subject(plan: Plan) -> str:
    """``Submit 2 runs of gemm_n_4096_k_4096 on H200``, or the new records when there is no run."""
    if plan.runs:
        noun = "run" if len(plan.runs) == 1 else "runs"
        definitions = _some(line.definition for line in plan.runs)
        gpus = _some(line.gpu for line in plan.runs)
        return f"Submit {len(plan.runs)} {noun} of {definitions} on {gpus}"
    return f"Submit {len(plan.new)} record(s): {_counts(plan.new)}"


def commit_message(plan: Plan, signer: trust.Signer, subject: str | None = None) -> str:
    """The commit's message: the subject (``--message`` or ``default_subject``), then the runs
    (definition, workload, implementation, GPU, latency with its statistic), the new records
    and who signed."""
    lines = [(subject or default_subject(plan)).strip(), ""]
    if plan.runs:
        lines.append("Runs (definition / workload / implementation / GPU / latency):")
        for run in plan.runs:
            lines.append(
                f"- {run.definition} / {run.workload} / {run.implementation} / {run.gpu} / {run.latency_text()}"
            )
            lines.append(f"  {run.digest}")
        lines.append("")
    lines += textwrap.wrap(f"New records: {_counts(plan.new)}.", width=72, break_on_hyphens=False)
    if plan.runs:
        lines += textwrap.wrap(
            f"Submission attestations: {len(plan.runs)}, signed by {signer.owner} (key {signer.keyid[:SHORT]}).",
            width=72,
            break_on_hyphens=False,
        )
    lines += ["", "Made with kictl submit."]
    return "\n".join(lines) + "\n"


def default_branch(plan: Plan) -> str:
    """``submit/<12 hex digits>`` of the first new run (of the first new record when there is none)."""
    first = plan.new_runs[0] if plan.new_runs else plan.new[0]
    return BRANCH_PREFIX + canon.digest_hex(first.digest)[:SHORT]


# --------------------------------------------------------------------------- submitting


@dataclass(frozen=True, slots=True)
class AddedFile:
    """A file the submission's commit adds."""

    path: str  # relative to the registry root
    kind: str  # a record kind, or "attestation"
    digest: str  # the record's (or, for an attestation, its subject's) digest
    name: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "digest": self.digest, "name": self.name}


@dataclass
class Submission:
    """What ``submit`` did."""

    branch: str
    commit: str
    base: str
    base_branch: str | None  # None for a detached HEAD
    signer: trust.Signer
    files: list[AddedFile]
    present: list[StoredRecord]
    runs: list[RunLine]
    message: str
    review: LocalReview
    pushed_to: str | None = None
    remotes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def records(self) -> list[AddedFile]:
        return [item for item in self.files if item.kind != "attestation"]

    @property
    def attestations(self) -> list[AddedFile]:
        return [item for item in self.files if item.kind == "attestation"]

    def to_json(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "commit": self.commit,
            "base": {"commit": self.base, "branch": self.base_branch},
            "signer": self.signer.to_json(),
            "records": [item.to_json() for item in self.records],
            "attestations": [item.to_json() for item in self.attestations],
            "alreadyPresent": [{"digest": r.digest, "kind": r.kind, "name": r.name} for r in self.present],
            "runs": [run.to_json() for run in self.runs],
            "message": self.message,
            "review": self.review.to_json(),
            "pushedTo": self.pushed_to,
            "notes": list(self.notes),
        }


def _clean_history(registry: Registry) -> GitHistory:
    """The registry's git history, refusing a repository without commits or with uncommitted changes."""
    if not registry.is_git_repository():
        raise RegistryError(f"{registry.root} is not a git repository; a submission is a git branch")
    history = registry.git
    if history.head() is None:
        raise RegistryError(f"{registry.root} has no commit yet; commit the registry before submitting to it")
    if history.is_dirty():
        status = history.status_lines()
        shown = status[:10] + ([f"... and {len(status) - 10} more"] if len(status) > 10 else [])
        raise RegistryError(
            f"the working tree of {registry.root} has uncommitted changes; commit or stash them "
            "(git stash -u), or pass records to kictl submit instead of adding them first",
            details=[f"  {line}" for line in shown],
        )
    return history


def _check_identity(history: GitHistory) -> None:
    """Git can name the commit's author and committer; else ``EnvError`` (5) saying how to set them.

    Asked before anything is signed or written (``git var``, which applies
    git's own rules: the environment, the configuration, ``user.useConfigOnly``).
    """
    for variable in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        try:
            history._run("var", variable)
        except RegistryError as exc:
            raise EnvError(
                "git has no identity to commit the submission with: set one with "
                "git config user.name 'Your Name' && git config user.email you@example.org "
                "(add --global for every repository); nothing was written",
                details=[exc.message],
            ) from exc


def _check_push_target(history: GitHistory, remote: str) -> None:
    if remote in history.remote_names():
        return
    if "/" in remote or ":" in remote or Path(remote).exists():
        return  # a URL or a path, which git push accepts
    known = ", ".join(history.remote_names()) or "none"
    raise UsageError(f"--push {remote}: no such remote (configured: {known}); give a remote, a URL or a path")


def _missing_folders(paths: Iterable[Path], stop: Path) -> list[Path]:
    """Folders above ``paths`` (below ``stop``) that do not exist yet, deepest first."""
    missing: set[Path] = set()
    for path in paths:
        folder = path.parent
        while folder != stop and folder not in missing and not folder.exists():
            missing.add(folder)
            folder = folder.parent
    return sorted(missing, key=lambda folder: len(folder.parts), reverse=True)


def _undo_files(transaction: Transaction, folders: Sequence[Path]) -> None:
    """Remove the files the transaction created and the then-empty folders made for them."""
    transaction.rollback()
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def submit(
    registry: Registry,
    records: Sequence[StoredRecord],
    key_path: Path,
    *,
    branch: str | None = None,
    message: str | None = None,
    push: str | None = None,
    review: ReviewFunction = local_review,
    allow_failed: bool = False,
) -> Submission:
    """Add ``records`` to a new branch of ``registry``, signing each new run, in one commit.

    Checks everything first (see the module's docstring), then writes the new
    records and one ``submission`` attestation per new BenchmarkRun in a
    transaction, commits them on the new branch ``branch`` (default
    ``default_branch``) through a temporary index, runs ``review`` on the
    commit, removes the files from the working tree again (the checkout is
    left as it was) and, with ``push``, pushes the branch there.

    Raises ``RegistryError`` (4) for no git repository, no commit, a dirty
    working tree, a record whose published file holds other bytes, or a git
    failure; ``RecordError`` (3) for an incomplete or inconsistent
    submission; ``CheckFailed`` (1) when nothing is new, the key is not an
    authorised submitter, or the review finds lints; ``EnvError`` (5) for an
    unusable key file or a git without an identity (user.name, user.email);
    ``UsageError`` (2) for a bad or existing branch name or an unknown remote;
    ``CheckFailed`` (1) for a new run that did not pass
    (``compile_error``, ``runtime_error``, ``failed``...) unless ``allow_failed``
    (a failure is worth publishing only on purpose).  On any of them after the
    first write, every file written is removed and the branch deleted.
    """
    history = _clean_history(registry)
    base = history.head()
    assert base is not None
    base_branch = history.current_branch()
    _check_identity(history)
    plan = plan_submission(registry, records)
    if not plan.new:
        raise CheckFailed(
            f"nothing to submit: all {len(plan.records)} record(s) are already in the registry; no branch was made"
        )
    failed = [line for line in plan.runs if line.status != "passed"]
    if failed and not allow_failed:
        raise CheckFailed(
            f"{len(failed)} new run(s) did not pass ({', '.join(sorted({line.status for line in failed}))}); "
            "pass --allow-failed to publish them on purpose; no branch was made"
        )
    signer = check_submitter(registry, key_path, plan.new_runs or plan.new[:1])
    name = branch or default_branch(plan)
    history.check_branch_name(name)
    if history.branch_exists(name):
        raise UsageError(
            f"branch {name} exists already; kictl submit never moves a branch: pass --branch NAME "
            f"or delete it (git branch -D {name})"
        )
    if push is not None:
        _check_push_target(history, push)
    targets = [registry.record_path(record.kind, record.digest) for record in plan.new]
    targets += [registry.attestation_folder(run.digest) / "envelope" for run in plan.new_runs]
    folders = _missing_folders(targets, registry.root)
    notes = []
    if base_branch is None:
        notes.append(f"HEAD is detached: the branch starts at {base[:SHORT]}")
    elif base_branch.startswith(BRANCH_PREFIX):
        notes.append(f"the branch starts at {base_branch}, itself a submission: it holds that one's records too")
    text = commit_message(plan, signer, message)
    transaction = Transaction()
    made_branch = False
    try:
        added = registry.add(list(plan.records), transaction=transaction)
        files = [
            AddedFile(path=registry.relative(item.path), kind=item.record.kind, digest=item.record.digest,
                      name=item.record.name)
            for item in added
            if item.created
        ]  # fmt: skip
        for run in plan.new_runs:
            path = trust.sign_record(registry, run.digest, key_path, transaction=transaction)
            files.append(AddedFile(path=registry.relative(path), kind="attestation", digest=run.digest, name=run.name))
        commit = history.commit_on_new_branch(name, [item.path for item in files], text, start=base)
        made_branch = True
        outcome = review(registry, base, commit)
        if not outcome.ok:
            raise CheckFailed(
                f"the local review says no ({outcome.summary}); nothing was submitted", details=outcome.lints
            )
        _undo_files(transaction, folders)
        if push is not None:
            history.push(push, name)
    except BaseException:
        _undo_files(transaction, folders)
        if made_branch:
            with contextlib.suppress(KictlError):
                history.delete_branch(name)
        raise
    return Submission(
        branch=name,
        commit=commit,
        base=base,
        base_branch=base_branch,
        signer=signer,
        files=files,
        present=list(plan.present),
        runs=list(plan.runs),
        message=text,
        review=outcome,
        pushed_to=push,
        remotes=history.remote_names(),
        notes=notes,
    )
