"""``kictl rerun`` and ``kictl attest rerun``: controlled reruns and their signatures (DESIGN §10).

The logic lives in ``kictl.rerun``; these commands parse options, call it and
render.  ``kictl rerun`` runs submitted code and never needs a key unless
``--sign`` asks for it; ``kictl attest rerun`` runs no submitted code.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kictl.advisories.rerun import runnable_advised_runs
from kictl.cli._common import JsonOption, RegistryOption, emit_json, err, format_ns, guarded, open_registry, out, table
from kictl.errors import CheckFailed, UsageError
from kictl.progress import progress
from kictl.rerun import rerun_runs, sign_results, write_results
from kictl.rerun.attest import key_roles, make_key_request
from kictl.rerun.job import select_runs
from kictl.rerun.request import RerunRequest, read_request, write_request
from kictl.store.files import write_atomic

if TYPE_CHECKING:
    from kictl.rerun import AttestReport, RerunResult

attest_app = typer.Typer(
    help="Check results made elsewhere and sign attestations about them.",
    no_args_is_help=True,
)


def _progress() -> contextlib.AbstractContextManager[Callable[[str], None]]:
    """Progress on stderr (kictl/progress.py): a live line on a terminal, ``t=SECONDS text`` lines elsewhere."""
    return progress()


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _result_json(result: RerunResult) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True)


def _result_rows(results: list[RerunResult], names: dict[str, tuple[str, str]]) -> list[str]:
    rows = []
    for result in results:
        implementation, workload = names.get(result.original, ("?", "?"))
        rows.append(
            [
                result.original[: len("sha256:") + 12],
                implementation,
                workload,
                result.verdict,
                _ratio(result.ratio),
                format_ns(result.original_ns),
                format_ns(result.rerun_ns),
                result.reason,
            ]
        )
    headers = ["run", "implementation", "workload", "verdict", "ratio", "claimed", "rerun", "why"]
    return table(headers, rows, right=(4, 5, 6))


def _signed_lines(report: AttestReport, relative: Any) -> list[str]:
    rows = [
        [
            item.job.run.digest[: len("sha256:") + 12],
            item.job.implementation.name,
            item.job.workload.name,
            item.judgement.verdict,
            _ratio(item.judgement.ratio),
            relative(path),
        ]
        for item, path in report.signed
    ]
    return table(["run", "implementation", "workload", "verdict", "ratio", "attestation"], rows, right=(4,))


@guarded
def rerun(
    runs: Annotated[
        list[str] | None,
        typer.Argument(help="BenchmarkRun digests, unique prefixes of 8+ hex digits, or names.", show_default=False),
    ] = None,
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help="Also rerun every BenchmarkRun the current branch adds since its merge base with REV "
            "(all the runs of a registry pull request).",
            metavar="REV",
            show_default=False,
        ),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Write the unsigned results here, for `kictl attest rerun DIR --key K`."),
    ] = None,
    request_path: Annotated[
        Path | None,
        typer.Option(
            "--request",
            metavar="FILE",
            help="The rerun request the signing side made (`kictl attest request`): its runs are rerun with "
            "the input secret and seed salt it gives. Without it the results cannot be signed.",
        ),
    ] = None,
    sign: Annotated[
        Path | None,
        typer.Option(
            "--sign",
            metavar="KEY",
            help="Check and sign at once with this verifier key, adding the records and attestations to the "
            "registry (only on a machine trusted with the key).",
        ),
    ] = None,
    device: Annotated[
        str, typer.Option(help="auto (the original's kind of device: cpu, or the first GPU), cpu, cuda or cuda:N.")
    ] = "auto",
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Rerun on another GPU product or comparability family; the verdict is then inconclusive."
        ),
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds allowed per implementation and workload.")] = 600.0,
    advisory: Annotated[
        str | None,
        typer.Option(
            "--advisory",
            metavar="ID",
            help="Also rerun every run this harness advisory marks that this machine can rerun comparably "
            "(CPU runs here, GPU runs on their GPU product); the others are listed.",
            show_default=False,
        ),
    ] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Rerun published BenchmarkRuns here, from the registry's records, and judge each against its original.

    Each run's job is rebuilt from its records: the Implementation's embedded
    sources, the Workload, the Definition and its reference, the protocol's
    timer, warm-up, iterations, trials, correctness rounds and tolerances.
    Correctness rounds use fresh secret seeds: the ones a rerun request
    (--request, made by the signer before this job) gives. The verdict: agrees
    (not slower than claimed beyond the policy's rerunTolerance; a faster
    rerun agrees), disagrees (slower beyond it and beyond both runs' noise),
    failed (the rerun did not pass) or inconclusive (not signable). A run from another GPU product or
    comparability family is refused unless --force. Exit 0 when every rerun
    agrees, 1 when some do not (results are written all the same), 2 usage,
    3 unknown or invalid records, 4 I/O, 5 refused here, or no GPU, or no key.
    """
    if out_dir is not None and sign is not None:
        raise UsageError("give --out DIR (sign elsewhere with `kictl attest rerun`) or --sign KEY, not both")
    if request_path is not None and sign is not None:
        raise UsageError("--sign KEY makes its own rerun request; --request FILE is for `--out DIR`")
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: not a folder")
    target = open_registry(registry)
    references = list(runs or ())
    if advisory is not None:  # docs/advisories.md: rerun what an advisory marks, with a fixed harness
        here, elsewhere = runnable_advised_runs(target, advisory)
        for digest, why in elsewhere:
            err(f"not rerun here: {digest}: {why}")
        err(f"advisory {advisory}: {len(here)} marked run(s) to rerun here, {len(elsewhere)} elsewhere")
        references += here
        if not references and base is None:
            raise CheckFailed(f"advisory {advisory} marks no run this machine can rerun")
    request: RerunRequest | None = None
    if request_path is not None:
        request = read_request(request_path)
    if sign is not None:
        key_roles(target, sign)  # a missing, loose or locked key fails now, not after the reruns
        request = make_key_request(sign, select_runs(target, references, base=base))
    with _progress() as say:
        report = rerun_runs(
            target,
            references,
            base=base,
            device=device,
            force=force,
            timeout_s=timeout,
            progress=say,
            request=request,
        )
    for warning in report.warnings:
        err(f"warning: {warning}")
    results = list(report.results.results)
    names = {digest: (job.implementation.name, job.workload.name) for digest, job in report.jobs.items()}
    if out_dir is not None:
        path, _ = write_results(out_dir, report.results, report.records)
        err(f"wrote {len(results)} result(s) and {len(report.records)} record(s) to {path.parent}")
        if request is None:
            err("warning: no --request: these results are bound to no rerun request and cannot be signed")
        else:
            err(f"next: kictl attest rerun {out_dir} --key VERIFIER_KEY (the key that made the request)")
    elif sign is not None:
        with tempfile.TemporaryDirectory(prefix="kictl-rerun-out-") as scratch:
            write_results(Path(scratch), report.results, report.records)
            signed = sign_results(target, Path(scratch), sign)
        for warning in signed.warnings:
            err(f"warning: {warning}")
        err(f"signed {len(signed.signed)} rerun attestation(s); {signed.added} record(s) added to {target.root}")
    else:
        err("nothing written: give --out DIR to keep the results, or --sign KEY")
    if as_json:
        emit_json([_result_json(result) for result in results])
    else:
        for line in _result_rows(results, names):
            out(line)
    sys.stdout.flush()
    unsettled = [result for result in results if result.verdict != "agrees"]
    if unsettled:
        counts: dict[str, int] = {}
        for result in unsettled:
            counts[result.verdict] = counts.get(result.verdict, 0) + 1
        summary = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
        raise CheckFailed(f"{len(unsettled)} of {len(results)} rerun(s) do not agree: {summary}")


@attest_app.command("request")
@guarded
def attest_request(
    key: Annotated[Path, typer.Option("--key", help="The verifier's private key file.", show_default=False)],
    out_file: Annotated[
        Path, typer.Option("--out", help="Where to write the request (give it to the GPU job).", show_default=False)
    ],
    runs: Annotated[
        list[str] | None,
        typer.Argument(help="BenchmarkRun digests, unique prefixes of 8+ hex digits, or names.", show_default=False),
    ] = None,
    base: Annotated[
        str | None,
        typer.Option(
            "--base", help="Also every BenchmarkRun the branch adds since REV.", metavar="REV", show_default=False
        ),
    ] = None,
    valid_for: Annotated[
        float, typer.Option("--valid-for", help="Hours the GPU job has to make the reruns.", min=0.01)
    ] = 6.0,
    registry: RegistryOption = None,
) -> None:
    """Make a rerun request before the GPU job starts: a fresh nonce, the job's window and the runs.

    The request carries the input secret and seed salt the GPU job must use,
    derived from the request and this key, so that `kictl attest rerun` with
    the same key can recheck that results were made for this request, inside
    its window. Give the file to `kictl rerun --request FILE --out DIR`. Exit
    0 written, 2 usage, 3 unknown runs, 4 I/O, 5 no usable key.
    """
    target = open_registry(registry)
    key_roles(target, key)
    digests = select_runs(target, list(runs or ()), base=base)
    request = make_key_request(key, digests, hours=valid_for)
    write_request(out_file, request)
    err(
        f"wrote a rerun request for {len(digests)} run(s), nonce {request.body.nonce}, open until "
        f"{request.body.not_after}, to {out_file}"
    )
    out(str(out_file))


@attest_app.command("rerun")
@guarded
def attest_rerun(
    folder: Annotated[Path, typer.Argument(help="A folder written by `kictl rerun --out`.", show_default=False)],
    key: Annotated[Path, typer.Option("--key", help="The verifier's private key file.", show_default=False)],
    require_verifier: Annotated[
        bool,
        typer.Option(
            "--require-verifier", help="Refuse a key without the verifier role (else it signs a community rerun)."
        ),
    ] = False,
    written_file: Annotated[
        Path | None,
        typer.Option(
            "--written",
            metavar="FILE",
            help="Also write the path of every file this signing wrote (relative to the registry), one a line: "
            "what a workflow uploads.",
        ),
    ] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check a rerun's unsigned results and sign a rerun attestation about each original.

    Checks that the results were made for a rerun request of this key
    (`kictl attest request`): runs asked for, the input secret and seed salt
    derived from the request (never the original's, never zero), times inside
    the request's window and not in the future, a nonce not signed before.
    Checks that every record hashes to its digest, that each result reruns the
    run it names (same definition, workload, implementation and protocol
    settings, on the same GPU product), and that its verdict is what its
    records give; re-judges with this registry's rerunTolerance; adds the
    reruns' records and signs. Inconclusive results are not signed. Nothing is
    written if anything fails. Exit 0 signed, 1 a check failed, 2 usage,
    3 invalid records, 4 I/O, 5 no usable key.
    """
    target = open_registry(registry)
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder written by `kictl rerun --out`")
    report = sign_results(target, folder, key, require_verifier=require_verifier)
    if written_file is not None:
        write_atomic(written_file, "".join(f"{path}\n" for path in report.written).encode())
    for warning in report.warnings:
        err(f"warning: {warning}")
    for item in report.skipped:
        err(f"not signed: {item.job.run.digest}: {item.judgement.verdict}: {item.judgement.reason}")
    if as_json:
        emit_json(
            [
                {
                    "run": item.job.run.digest,
                    "rerun": item.rerun.digest if item.rerun is not None else None,
                    "verdict": item.judgement.verdict,
                    "ratio": item.judgement.ratio,
                    "signed": target.relative(path) if path is not None else None,
                }
                for item, path in [*report.signed, *((item, None) for item in report.skipped)]
            ]
        )
    else:
        for line in _signed_lines(report, target.relative):
            out(line)
    err(f"signed {len(report.signed)} rerun attestation(s); {report.added} record(s) added to {target.root}")


def register(app: typer.Typer) -> None:
    app.command("rerun")(rerun)
    app.add_typer(attest_app, name="attest")
