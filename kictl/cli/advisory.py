"""``kictl advisory add|withdraw|list|show``: harness advisories (docs/advisories.md).

The logic lives in ``kictl.advisories``; these commands parse options, call it
and render.  Exit codes: 0 ok, 1 a check said no (the trust root does not
verify, the key cannot make the advisory count), 2 usage (a version out of
order, an existing file), 3 an invalid advisory document or an unknown id,
4 registry or I/O, 5 environment (no key, a locked key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kictl.advisories.document import advisory_value, parse_advisory
from kictl.advisories.published import load_advisories, publish_advisory, withdrawn
from kictl.cli._common import JsonOption, RegistryOption, emit_json, err, guarded, open_registry, out, table
from kictl.standing import affected_runs
from kictl.store.inputs import parse_json_file
from kictl.trust import load_private_key

app = typer.Typer(
    help="Harness advisories: signed notices of a hole in the harness, and the published runs it touches.",
    no_args_is_help=True,
)

KeysOption = Annotated[
    list[Path],
    typer.Option(
        "--key",
        help="A maintainer's private key file (repeatable). Passphrase from $KICTL_KEY_PASSPHRASE.",
        show_default=False,
    ),
]


def _affects_text(advisory: Any) -> str:
    affects = advisory.affects
    ranges = []
    for bound in affects.versions:
        low = f">={bound.introduced}" if bound.introduced else ""
        high = f"<{bound.fixed}" if bound.fixed else ""
        ranges.append(",".join(part for part in (low, high) if part) or "every version")
    parts = [f"{affects.harness} {' or '.join(ranges)}"]
    if affects.commits:
        parts.append(f"{len(affects.commits)} commit(s)")
    for name, values in (("timer", affects.timers), ("device", affects.devices), ("isolation", affects.isolation)):
        parts.append(f"{name} {'|'.join(values) if values else 'any'}")
    return "; ".join(parts)


@app.command("add")
@guarded
def add(
    document: Annotated[Path, typer.Argument(help="The advisory document (JSON, docs/advisories.md).")],
    key: KeysOption,
    registry: RegistryOption = None,
) -> None:
    """Sign an advisory document with maintainer key(s) and publish it under registry/advisories/; print its path.

    Version 1 publishes a new id; a higher version updates the advisory (its
    current version must be the one before). The signed file must verify
    against the trust root now.
    """
    target = open_registry(registry)
    value = parse_json_file(document)
    advisory = parse_advisory(value, source=str(document))
    keys = [load_private_key(path) for path in key]
    path = publish_advisory(target, advisory, keys)
    err(f"signed {advisory.id} version {advisory.version} ({advisory.status})")
    out(target.relative(path))


@app.command("withdraw")
@guarded
def withdraw(
    advisory_id: Annotated[str, typer.Argument(metavar="ID", help="The advisory, e.g. KI-2026-0001.")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is withdrawn (one line).", show_default=False)],
    key: KeysOption,
    registry: RegistryOption = None,
) -> None:
    """Publish the advisory's next version, withdrawn: it marks nothing from then on."""
    target = open_registry(registry)
    current = load_advisories(target).get(advisory_id).advisory
    keys = [load_private_key(path) for path in key]
    path = publish_advisory(target, withdrawn(current, reason), keys)
    err(f"withdrew {advisory_id} (version {current.version + 1})")
    out(target.relative(path))


@app.command("list")
@guarded
def list_advisories(registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """Every published advisory (its current version) and each version file that counts for nothing."""
    target = open_registry(registry)
    found = load_advisories(target)
    if as_json:
        emit_json(
            {
                "advisories": [
                    {**advisory_value(item.advisory), "published": item.to_json()}
                    for _, item in sorted(found.current.items())
                ],
                "ignored": [{"path": path, "reason": reason} for path, reason in found.ignored],
                "missing": [missing.to_json() for missing in found.missing],  # deleted or changed by this copy
            }
        )
        return
    rows = [
        [advisory_id, str(item.advisory.version), item.advisory.status, item.advisory.exploit_class,
         item.advisory.summary[:60]]
        for advisory_id, item in sorted(found.current.items())
    ]  # fmt: skip
    for line in table(["id", "version", "status", "class", "summary"], rows):
        out(line)
    for path, reason in found.ignored:
        err(f"ignored: {path}: {reason}")
    if not rows:
        err("no published advisories")


@app.command("show")
@guarded
def show(
    advisory_id: Annotated[str, typer.Argument(metavar="ID", help="The advisory, e.g. KI-2026-0001.")],
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """An advisory, who signed it, and the runs it marks now (and those a rerun cleared)."""
    target = open_registry(registry)
    found = load_advisories(target)
    item = found.get(advisory_id)
    advisory, marks = affected_runs(target, advisory_id)
    marked = sorted(marks.marked)
    cleared = sorted((run, rerun) for run, pairs in marks.cleared.items() for _, rerun in pairs)
    if as_json:
        emit_json(
            {
                **advisory_value(advisory),
                "published": item.to_json(),
                "marks": marked,
                "cleared": [{"run": run, "byRerun": rerun} for run, rerun in cleared],
            }
        )
        return
    out(f"advisory   {advisory.id} version {advisory.version} ({advisory.status})")
    out(f"summary    {advisory.summary}")
    out(f"class      {advisory.exploit_class} (impact: {advisory.impact})")
    out(f"affects    {_affects_text(advisory)}")
    out(f"fixed      {advisory.fixed.version if advisory.fixed else 'not yet'}")
    out(f"corpus     {', '.join(advisory.corpus)}")
    signers = ", ".join(f"{s.owner} ({s.keyid[:8]})" for s in item.signers)
    out(f"signed by  {signers}")
    if advisory.withdrawn_reason:
        out(f"withdrawn  {advisory.withdrawn_reason}")
    out(f"marks      {len(marked)} run(s)")
    for run in marked:
        out(f"  {run}")
    if cleared:
        out(f"cleared    {len(cleared)} run(s) by a rerun of an unaffected harness")
        for run, rerun in cleared:
            out(f"  {run}  (rerun {rerun})")


def register(root_app: typer.Typer) -> None:
    root_app.add_typer(app, name="advisory")
