"""``kictl cite``: how to cite a record (title, digest, permalink, the commit that added it, the access
date); for a run also what a reader checks a figure by: the GPU, the figure and its statistic, the
submitter whose signature vouches for it, and the evidence level.

A registry whose policy has no ``permalinkBase`` (a private one, as ``kictl init`` makes it) has no
permalinks: its citations give the digest, the registry's own location (its ``origin`` remote, else its
folder) and the record's file there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kictl import canon
from kictl.errors import CheckFailed, NotFoundError
from kictl.index.query import QueryIndex
from kictl.policy import Policy
from kictl.rank._common import advisory_marks
from kictl.rank.leaderboards import _now
from kictl.records import StoredRecord
from kictl.standing import VerifyReport, cap_levels, verify_report
from kictl.store.git import public_location


@dataclass(frozen=True, slots=True)
class Citation:
    """``kictl cite``: how to cite one record."""

    kind: str
    digest: str
    name: str
    title: str
    permalink: str  # "" where the registry's policy has no permalinkBase
    commit: str | None
    committed: str | None  # the commit's date
    accessed: str  # YYYY-MM-DD
    gpu: str | None = None  # a run's GPU product
    latency_ns: int | None = None  # a run's figure, in its primary statistic
    statistic: str | None = None
    submitters: tuple[str, ...] = ()  # owners of the keys whose valid submission signatures vouch for the run
    evidence: str | None = None  # a run's evidence level
    #: the open harness advisories that mark the run (docs/advisories.md): a citation says so
    advisories: tuple[str, ...] = ()
    #: where the registry is (its origin remote without credentials, else its folder) and the record's file in it
    location: str = ""
    path: str | None = None

    @property
    def where(self) -> str:
        """The permalink, else ``KernelIndex registry at LOCATION (PATH)``."""
        if self.permalink:
            return self.permalink
        return f"KernelIndex registry at {self.location}" + (f" ({self.path})" if self.path else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "digest": self.digest,
            "name": self.name,
            "title": self.title,
            "permalink": self.permalink or None,
            "location": self.location,
            "path": self.path,
            "commit": self.commit,
            "committed": self.committed,
            "accessed": self.accessed,
            "gpu": self.gpu,
            "latencyNs": self.latency_ns,
            "primaryStatistic": self.statistic,
            "submitters": list(self.submitters),
            "evidence": self.evidence,
            "advisories": list(self.advisories),
        }


def _default_title(index: QueryIndex, record: StoredRecord) -> str:
    if record.kind != "BenchmarkRun":
        return f"KernelIndex {record.kind} {record.name}"
    (run,) = index.runs([record.digest])
    definition = index.definition(run.definition) if run.definition else None
    parts = [
        run.implementation_name or run.implementation,
        "on",
        f"{definition.name if definition else '?'}/{run.workload_name or '?'},",
        run.gpu or "unknown GPU",
    ]
    if run.latency_ns is not None and run.statistic is not None:
        parts.append(f"({run.statistic} {run.latency_ns} ns)")
    return "KernelIndex run: " + " ".join(parts)


def _refuse_tampered(index: QueryIndex, ref: str) -> None:
    """A reference to a record file that no longer matches its digest: ``CheckFailed`` (exit 1), never a citation."""
    hex_part = ref.removeprefix(canon.DIGEST_PREFIX)
    if len(hex_part) < 8 or any(char not in "0123456789abcdef" for char in hex_part):
        return
    for path, message in index.problems():
        if path.rsplit("/", 1)[-1].startswith(hex_part) and "hashes to" in message:
            raise CheckFailed(f"{path} does not match its digest ({message}): not cited")


def citation(
    index: QueryIndex,
    ref: str,
    *,
    policy: Policy,
    accessed: datetime | None = None,
    report: VerifyReport | None = None,
    marks: tuple[str, ...] | None = None,
) -> Citation:
    """Title, digest, permalink, adding commit and access date of a record.

    A caller that has judged the record already passes what it found, judged on the same registry state:
    ``report`` (``kictl.standing.verify_report`` of it) and ``marks`` (the open advisories that mark it, as
    ``kictl.standing.advisory_marks`` gives them). The site does, for each run page: judging each run
    again here, and loading and verifying every advisory for each run, was half of a build.

    Raises ``NotFoundError`` (exit 3) for an unknown or ambiguous reference,
    ``CheckFailed`` (exit 1) for a record whose file does not match its digest.
    """
    try:
        kind, digest, name = index.resolve_any(ref)
    except NotFoundError:
        _refuse_tampered(index, ref)
        raise
    record = index.load_record(digest)
    title = record.title or _default_title(index, record)
    commit = date = None
    registry = index.registry
    path = index.path_of(digest)
    if registry.is_git_repository() and index.commit is not None and path is not None:
        info = registry.git.first_added(path).get(path)
        if info is not None:
            commit, date = info.sha, info.date
    moment = _now(accessed)
    facts = index.runs([digest]) if kind == "BenchmarkRun" else []
    if marks is None:
        marks = advisory_marks(registry, facts).get(digest, ())
    cite = Citation(
        kind=kind,
        digest=digest,
        name=name,
        title=title,
        permalink=policy.permalink_base + digest if policy.permalink_base else "",
        commit=commit,
        committed=date,
        accessed=moment.strftime("%Y-%m-%d"),
        advisories=marks,
        location=public_location(registry.root),
        path=path,
    )
    if record.kind != "BenchmarkRun":
        return cite
    (run,) = index.runs([digest])
    if report is None or report.digest != digest:
        report = verify_report(registry, digest)
    submitters = sorted(
        {
            signer.owner
            for result in report.attestations
            if result.valid and result.counts_for == "submission"
            for signer in result.signers
        }
    )
    return replace(
        cite,
        gpu=run.gpu,
        latency_ns=run.latency_ns,
        statistic=run.statistic,
        submitters=tuple(submitters),
        evidence=cap_levels([run], {digest: report.level})[digest],  # no kept samples: reported at best
    )


_BIBTEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "%": r"\%",
    "&": r"\&",
    "#": r"\#",
    "_": r"\_",
    "$": r"\$",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def bibtex_escape(text: str) -> str:
    """Text safe inside a BibTeX field (LaTeX special characters escaped)."""
    return "".join(_BIBTEX_SPECIAL.get(char, char) for char in text)


def _advised(cite: Citation) -> str:
    """``; measured by a harness under advisory KI-...`` when an advisory marks the run, else nothing."""
    if not cite.advisories:
        return ""
    return f"; measured by a harness under advisory {', '.join(cite.advisories)} (docs/advisories.md)"


def bibtex(cite: Citation) -> str:
    """A ``@misc`` BibTeX entry for the citation."""
    hex_digest = canon.digest_hex(cite.digest)
    year = (cite.committed or cite.accessed)[:4]
    added = (
        f"added in commit {cite.commit[:12]} ({cite.committed[:10]})"
        if cite.commit and cite.committed
        else ("not yet committed")
    )
    measured = _measured(cite)
    lines = [
        f"@misc{{kernelindex_{hex_digest[:12]},",
        f"  title        = {{{{{bibtex_escape(cite.title)}}}}},",
        "  author       = {{KernelIndex}},",
        f"  year         = {{{year}}},",
        f"  howpublished = {{\\url{{{cite.permalink}}}}},"
        if cite.permalink
        else f"  howpublished = {{{bibtex_escape(cite.where)}}},",
        f"  note         = {{{bibtex_escape(cite.kind)} {cite.digest}{bibtex_escape(measured)}, {added}; "
        f"accessed {cite.accessed}{_advised(cite)}}},",
        f"  urldate      = {{{cite.accessed}}}",
        "}",
    ]
    return "\n".join(lines)


def _measured(cite: Citation) -> str:
    """``, H200, median 9536 ns, submitted by alice (reported)`` for a run; empty for other records."""
    if cite.kind != "BenchmarkRun":
        return ""
    parts = [cite.gpu or "unknown GPU"]
    if cite.latency_ns is not None and cite.statistic is not None:
        parts.append(f"{cite.statistic} {cite.latency_ns} ns")
    parts.append(f"submitted by {', '.join(cite.submitters)}" if cite.submitters else "no valid submission signature")
    return ", " + ", ".join(parts) + f" ({cite.evidence or 'unsigned'})"
