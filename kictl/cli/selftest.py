"""``kictl selftest``: run the exploit corpus against the installed harness (docs/advisories.md "Selftest").

The logic lives in ``kictl.selftest``.  Exit codes: 0 every entry caught (and
every honest entry passed), 1 an entry missed (named), 2 usage, 3 a malformed
corpus or an unknown definition, 4 I/O, 5 no GPU for ``--device cuda``, no
sandbox, or no corpus installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kictl import selftest as core
from kictl.cli._common import JsonOption, RegistryOption, emit_json, err, guarded, open_registry, out, table
from kictl.cli.bench import failure_reason
from kictl.errors import CheckFailed
from kictl.progress import progress


@guarded
def selftest(
    device: Annotated[str, typer.Option(help="auto (the CPU, and CUDA where a GPU is present), cpu or cuda.")] = "auto",
    entry: Annotated[
        list[str] | None,
        typer.Option("--entry", help="Run only this corpus entry (repeatable).", show_default=False),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Also write the result here (the folder of `kictl rerun --out`).", show_default=False
        ),
    ] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the exploit corpus (tests/assets/cheats) against this harness and say which entries it catches.

    Each cheat must be judged as the corpus says (reward_hack naming its check,
    or its own failure), and each honest entry must pass. The result is kept in
    selftest.json beside the user's kictl config (and --out DIR), bound to the
    harness's version and commit: `kictl
    attest rerun` signs only results of a harness that passed it. Exit 0 when
    every entry is caught, 1 naming the entries missed.
    """
    target = open_registry(registry)
    with progress() as say:  # a line per step (t=SECONDS ...) on a log, a live line with a bar on a terminal
        report = core.run_selftest(target, device=device, only=tuple(entry or ()), progress=say)
    for path in core.write_result(report, out_dir):
        err(f"wrote {path}")
    if as_json:
        emit_json(report.to_json())
    else:
        harness = report.harness
        out(f"harness  {harness.get('name')} {harness.get('version')} {harness.get('commit', '(no commit)')}")
        rows = [
            [result.entry, result.workload, result.device, result.expected[:44], result.status or "-",
             "caught" if result.caught else "MISSED"]
            for result in report.results
        ]  # fmt: skip
        for line in table(["entry", "workload", "device", "expected", "got", "verdict"], rows):
            out(line)
    for session, reason in report.skipped:
        err(f"skipped session {session}: {reason}")
    missed = report.missed
    for result in missed:
        err(f"missed: {result.entry} on {result.workload} ({result.device}): expected {result.expected}, "
            f"got {result.status}: {failure_reason(result.detail, width=160)}")  # fmt: skip
    if missed:
        names = sorted({result.entry for result in missed})
        raise CheckFailed(f"{len(names)} corpus entr{'y' if len(names) == 1 else 'ies'} missed: {', '.join(names)}")
    err(f"ok: {len(report.results)} corpus run(s) judged as expected on {', '.join(report.devices)}")


def register(app: typer.Typer) -> None:
    app.command()(selftest)
