"""``kictl cite``: how to cite a record (title, digest, permalink, the commit that added it, the access
date).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kictl import canon
from kictl.index import QueryIndex
from kictl.policy import Policy
from kictl.rank.leaderboards import _now
from kictl.records import StoredRecord


@dataclass(frozen=True, slots=True)
class Citation:
    """``kictl cite``: how to cite one record."""

    kind: str
    digest: str
    name: str
    title: str
    permalink: str
    commit: str | None
    committed: str | None  # the commit's date
    accessed: str  # YYYY-MM-DD

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "digest": self.digest,
            "name": self.name,
            "title": self.title,
            "permalink": self.permalink,
            "commit": self.commit,
            "committed": self.committed,
            "accessed": self.accessed,
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


def citation(index: QueryIndex, ref: str, *, policy: Policy, accessed: datetime | None = None) -> Citation:
    """Title, digest, permalink, adding commit and access date of a record.

    Raises ``NotFoundError`` (exit 3) for an unknown or ambiguous reference.
    """
    kind, digest, name = index.resolve_any(ref)
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
    return Citation(
        kind=kind,
        digest=digest,
        name=name,
        title=title,
        permalink=policy.permalink_base + digest,
        commit=commit,
        committed=date,
        accessed=moment.strftime("%Y-%m-%d"),
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


def bibtex(cite: Citation) -> str:
    """A ``@misc`` BibTeX entry for the citation."""
    hex_digest = canon.digest_hex(cite.digest)
    year = (cite.committed or cite.accessed)[:4]
    added = (
        f"added in commit {cite.commit[:12]} ({cite.committed[:10]})"
        if cite.commit and cite.committed
        else ("not yet committed")
    )
    lines = [
        f"@misc{{kernelindex_{hex_digest[:12]},",
        f"  title        = {{{{{bibtex_escape(cite.title)}}}}},",
        "  author       = {{KernelIndex}},",
        f"  year         = {{{year}}},",
        f"  howpublished = {{\\url{{{cite.permalink}}}}},",
        f"  note         = {{{bibtex_escape(cite.kind)} {cite.digest}, {added}; accessed {cite.accessed}}},",
        f"  urldate      = {{{cite.accessed}}}",
        "}",
    ]
    return "\n".join(lines)
