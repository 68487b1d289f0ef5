"""``kictl site build`` and ``kictl site serve``: the index's pages (DESIGN §11).

``build`` calls ``kictl.site.build_site`` and prints the output folder on
stdout (``--json``: what the build did); ``serve`` serves a built folder on
127.0.0.1 with the standard library's ``http.server`` to look at it locally.
Exit codes: 0 ok, 2 usage, 3 an invalid record, 4 registry or I/O (the output
folder cannot be written), 5 environment (matplotlib missing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kictl.cli._common import JsonOption, RegistryOption, emit_json, err, guarded, open_registry, out
from kictl.errors import RegistryError, UsageError
from kictl.progress import progress
from kictl.site import build_site
from kictl.site.serve import site_server

app = typer.Typer(
    help="The index's static pages: build them from the registry, serve them locally.", no_args_is_help=True
)


@app.command("build")
@guarded
def build(
    out_dir: Annotated[Path, typer.Argument(metavar="OUT", help="Folder to write the site into (created if missing).")],
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="Where the site will be published, for canonical links (e.g. https://kernelindex.dev/)."
        ),
    ] = None,
    incremental: Annotated[
        bool,
        typer.Option("--incremental", help="Render only the pages whose inputs changed since the last build into OUT."),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Build into a non-empty folder that kictl did not build here, removing none of its files."
        ),
    ] = False,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build the static site: the index, a page per definition, comparison group, run, implementation and GPU.

    Every page has its JSON beside it (the CLI's --json documents). Building
    the same registry state twice gives byte-identical files. OUT must be new,
    empty or built here before: never build into an unpacked artifact. Exit 2
    for another folder (unless --force) or a link, 5 without matplotlib (pip
    install 'kictl\\[site]'), 4 when OUT cannot be written or holds a link.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} exists and is not a folder")
    target = open_registry(registry)
    with progress() as say:  # a live line on a terminal, `t=SECONDS what` lines elsewhere (CI logs, | tee)
        say("reading the registry and judging its attestations")
        report = build_site(target, out_dir, base_url=base_url, incremental=incremental, force=force, progress=say)
    if as_json:
        emit_json(
            {
                "out": str(out_dir.resolve()),
                "mode": report.mode,
                "pages": report.pages,
                "rendered": report.rendered,
                "filesWritten": report.files_written,
                "filesRemoved": report.files_removed,
                "verified": report.verified,
                "seconds": round(report.seconds, 3),
                "asOf": report.as_of,
                "commit": report.commit,
            }
        )
    else:
        out(str(out_dir.resolve()))
    err(
        f"{report.mode} build: {report.rendered} of {report.pages} pages rendered, "
        f"{report.files_written} files written, {report.files_removed} removed, "
        f"{report.verified} runs' signatures checked, {report.seconds:.1f} s"
    )


@app.command("serve")
@guarded
def serve(
    site_dir: Annotated[Path, typer.Argument(metavar="SITE", help="A folder made by `kictl site build`.")],
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0 picks a free one).")] = 8000,
) -> None:
    """Serve a built site on http://127.0.0.1:PORT/ until interrupted (Ctrl-C).

    Only files reached without a link are served, with a policy that runs no script and asks no other host.
    """
    if not (site_dir / "index.html").is_file():
        raise UsageError(f"{site_dir} has no index.html; build it first with `kictl site build {site_dir}`")
    try:
        server = site_server(site_dir, port)
    except OSError as exc:
        raise RegistryError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from exc
    err(f"serving {site_dir} on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="site")
