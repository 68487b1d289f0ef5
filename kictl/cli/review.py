"""``kictl review``: judge the changes of a registry pull request (docs/review.md)."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from kictl.cli._common import RegistryOption, emit_json, err, guarded, open_registry
from kictl.errors import CheckFailed, RegistryError, UsageError
from kictl.review import render_markdown, render_text, review
from kictl.store.files import write_atomic
from kictl.terminal import terminal_safe


class Format(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


@guarded
def review_command(
    base: Annotated[
        str,
        typer.Option(
            "--base",
            help="The branch the PR goes into (e.g. origin/main); the review starts at its merge base with --head.",
            show_default=False,
        ),
    ],
    head: Annotated[str, typer.Option("--head", help="The PR's revision.")] = "HEAD",
    registry: RegistryOption = None,
    output_format: Annotated[
        Format, typer.Option("--format", help="text for a terminal, markdown for a PR comment, json for machines.")
    ] = Format.text,
    as_json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
    json_file: Annotated[
        Path | None,
        typer.Option("--json-file", help="Also write the JSON report to this file.", show_default=False),
    ] = None,
) -> None:
    """Review the files a registry PR changes: lints fail it (exit 1), hints advise.

    Reads git objects only (the merge base of --base and --head, and --head),
    never the working tree, and runs no code from the PR.
    """
    if as_json and output_format not in (Format.text, Format.json):
        raise UsageError(f"--json and --format {output_format.value} disagree; give one of them")
    chosen = Format.json if as_json else output_format
    target = open_registry(registry)
    report = review(target, base, head)
    document = report.to_json()
    if json_file is not None:
        try:
            write_atomic(json_file, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        except RegistryError as exc:
            raise RegistryError(f"--json-file: {exc.message}") from exc
    if chosen is Format.json:
        emit_json(document)
    elif chosen is Format.markdown:
        typer.echo(terminal_safe(render_markdown(report)), nl=False)
    else:
        typer.echo(terminal_safe(render_text(report)), nl=False)
    err(f"review: {report.summary()}")
    if not report.ok:
        raise CheckFailed(f"{len(report.lints)} lint(s): the PR cannot be merged as it is")


def register(app: typer.Typer) -> None:
    app.command("review")(review_command)
