"""The ``submit`` command: records on disk become a signed pull-request branch of the registry.

The logic lives in ``kictl.submit``; this module parses options, calls
``submit`` and renders what it did on stdout, with the next step on stderr.
Exit codes: 0 a branch was made, 1 a check said no (nothing new, a key the
trust root does not authorise, the local review), 2 usage (a bad or existing
branch, an unknown remote), 3 invalid or incomplete records, 4 registry or
git (not a repository, a dirty working tree, a git failure), 5 environment
(no key file, loose permissions, wrong passphrase).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Annotated

import typer

from kictl import submit as submit_core
from kictl.cli._common import JsonOption, RegistryOption, emit_json, err, guarded, open_registry, out, short
from kictl.store.inputs import read_record_inputs
from kictl.submit import Submission

WIDTH = 100


def _next_step(result: Submission) -> str:
    target = result.base_branch or f"the branch you started from ({result.base[:12]})"
    if result.pushed_to is not None:
        return f"next: open a pull request from {result.branch} into {target} (pushed to {result.pushed_to})"
    remote = "origin" if "origin" in result.remotes else (result.remotes[0] if result.remotes else "REMOTE")
    return f"next: git push {remote} {result.branch}, then open a pull request from it into {target}"


def _wrapped(text: str, indent: str) -> list[str]:
    return textwrap.wrap(
        text, width=WIDTH, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False
    ) or [indent]


def _field(label: str, text: str) -> list[str]:
    return textwrap.wrap(
        text, width=WIDTH, initial_indent=f"{label:<11}", subsequent_indent=" " * 11, break_on_hyphens=False
    ) or [label]


def render(result: Submission) -> list[str]:
    """The text report of a submission (fits 100 columns; ``--json`` has every digest whole)."""
    added = submit_core.count_kinds(item.kind for item in result.records)
    signer = result.signer
    lines = [
        *_field("branch", result.branch),
        *_field("commit", f"{result.commit[:12]} on top of {result.base_branch or 'detached HEAD'} {result.base[:12]}"),
        *_field("records", f"{len(result.records)} new, {len(result.present)} already in the registry"),
        *_wrapped(added, " " * 11),
        *_field("signed", f"{len(result.attestations)} submission attestation(s) by {signer.owner} "
                f"(key {signer.keyid[:12]})"),
    ]  # fmt: skip
    if result.runs:
        lines.append(f"runs ({len(result.runs)}): run, latency, GPU, implementation; definition / workload")
        for run in result.runs:
            lines += _wrapped(f"{short(run.digest)}  {run.latency_text()}  {run.gpu}  {run.implementation}", "  ")
            lines += _wrapped(f"{run.definition} / {run.workload}", "    ")
    lines += _field("review", result.review.summary)
    if result.pushed_to is not None:
        lines += _field("pushed", f"{result.branch} to {result.pushed_to}")
    for note in result.notes:
        lines += _field("note", note)
    return lines


@guarded
def submit(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Record files, JSON lists, manifests, or folders (e.g. the --out folder of kictl bench); "
            "'-' reads stdin.",
            metavar="PATH",
            show_default=False,
        ),
    ],
    key: Annotated[
        Path,
        typer.Option(
            "--key",
            help="Your submitter's private key (passphrase from $KICTL_KEY_PASSPHRASE).",
            metavar="KEY",
            show_default=False,
        ),
    ],
    registry: RegistryOption = None,
    branch: Annotated[
        str | None,
        typer.Option(
            "--branch",
            metavar="NAME",
            help="Name of the new branch (default: submit/<12 hex digits of the first new run>).",
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option("--message", metavar="TEXT", help="The commit's subject line (the list of runs always follows)."),
    ] = None,
    push: Annotated[
        str | None,
        typer.Option("--push", metavar="REMOTE", help="Push the new branch to this remote (a name, URL or path)."),
    ] = None,
    allow_failed: Annotated[
        bool,
        typer.Option("--allow-failed", help="Also submit runs that did not pass (compile_error, failed, ...)."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Submit records as one signed commit on a new branch, ready for a pull request.

    New records are added, each new BenchmarkRun gets a submission attestation signed
    with --key, and one commit listing the runs is made on a new branch. Your checkout
    (branch, index, working tree) is left exactly as it was, and on any failure nothing
    is left behind. The working tree must be clean.

    Exit codes: 0 a branch was made; 1 nothing new, a key the trust root does not
    authorise, or the local review said no; 2 a bad or existing branch, an unknown
    remote; 3 invalid or incomplete records; 4 not a git repository, a dirty working
    tree, a git failure; 5 no usable key file, or git has no identity (user.name, user.email).
    """
    target = open_registry(registry)
    stdin = sys.stdin.buffer.read() if any(str(path) == "-" for path in paths) else None
    records = read_record_inputs(paths, stdin=stdin)
    result = submit_core.submit(
        target, records, key, branch=branch, message=message, push=push, allow_failed=allow_failed
    )
    if as_json:
        emit_json(result.to_json())
    else:
        for line in render(result):
            out(line)
    err(_next_step(result))


def register(app: typer.Typer) -> None:
    app.command()(submit)
