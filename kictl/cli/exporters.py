"""``kictl export``: write the index's records in other harnesses' formats.

``kictl export flashinfer-trace OUT --gpu PRODUCT`` writes a FlashInfer Trace
set of the verified winners on one GPU product for FlashInfer-Bench's
``apply`` (``kictl.exporters.flashinfer_trace``).  stdout lists the exported
traces (or, with ``--json``, one document with what was exported and what was
left out and why); stderr carries the summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kictl.cli._common import JsonOption, RegistryOption, emit_json, err, guarded, open_registry, out, short, table
from kictl.exporters.flashinfer_trace import export_flashinfer_trace
from kictl.render import WIDTH

app = typer.Typer(help="Export records in other harnesses' formats.", no_args_is_help=True)

LEFT_OUT_SHOWN = 5


@app.command("flashinfer-trace")
@guarded
def flashinfer_trace(
    path: Annotated[
        Path, typer.Argument(help="The folder to write (it must not exist yet).", show_default=False, metavar="OUT")
    ],
    gpu: Annotated[str, typer.Option("--gpu", help="The GPU product whose runs are exported, e.g. H200.")],
    evidence: Annotated[
        str,
        typer.Option("--evidence", help="Minimum evidence level: verified, reported, unsigned or disputed."),
    ] = "verified",
    definition: Annotated[
        list[str] | None,
        typer.Option("--definition", help="Export only this definition (repeatable; default: all)."),
    ] = None,
    require_generalizes: Annotated[
        bool,
        typer.Option(
            "--require-generalizes",
            help="Export a run only when a verifier's rerun found it correct on held-out shapes.",
        ),
    ] = False,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write a FlashInfer Trace set of each comparison group's #1 on one GPU, for FlashInfer-Bench's apply.

    Only runs ranked at or above the evidence level, on that GPU, not named by
    an open harness advisory, and (with --require-generalizes) correct on
    held-out shapes are exported; each trace cites its run's digest and
    permalink; kernelindex.json in OUT says what was left out and why. The
    same registry gives the same bytes. Exit 1 when nothing qualifies
    (nothing is written), 2 when OUT exists or an option is wrong, 3 for an
    unknown definition, 4 when OUT cannot be written.
    """
    target = open_registry(registry)

    report = export_flashinfer_trace(
        target,
        path,
        gpu=gpu,
        min_evidence=evidence,
        definitions=tuple(definition or ()),
        require_generalizes=require_generalizes,
    )
    if as_json:
        emit_json(report.to_json())
    else:
        rows = [
            [short(item.run), item.evidence, item.definition, item.workload, item.implementation]
            for item in report.exported
        ]
        if rows:  # aligned columns (issue 45), names cut to the terminal's width, the digest never
            headers = ["run", "evidence", "definition", "workload", "implementation"]
            for line in table(headers, rows, cut=(2, 3, 4), width=WIDTH):
                out(line)
    err(
        f"{report.out}: {len(report.exported)} trace(s) of {len({item.definition for item in report.exported})} "
        f"definition(s) on {report.gpu} at evidence {report.min_evidence} or above; "
        f"{len(report.left_out)} run(s) left out ({report.out / 'kernelindex.json'} says why)"
    )
    for left in report.left_out[:LEFT_OUT_SHOWN]:
        err(f"left out: {short(left.run)} {left.definition} {left.workload} {left.implementation}: {left.reason}")
    if len(report.left_out) > LEFT_OUT_SHOWN:
        err(f"left out: … and {len(report.left_out) - LEFT_OUT_SHOWN} more")
