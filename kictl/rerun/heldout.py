"""Held-out shapes in controlled reruns: does a kernel generalize beyond the benchmarked shapes? (DESIGN §10, §15)

A kernel tuned to the workloads it was benchmarked on (a hard-coded batch
size, a grid sized for one shape) is right on those shapes only.  A verifier's
rerun therefore also checks correctness, not speed, on shapes the submitter
never saw:

* the shapes are drawn from the definition's legal axis values
  (``kictl.families.legal``: ranges, multiples and choices stated as
  ``constraints``, and for the catalogue's definitions the ranges kictl
  states by digest, ``kictl.importers.catalogue_ranges``) and are none of
  the submitted workloads' shapes;
* the draw is seeded by a secret made when the rerun starts and disclosed in
  the rerun attestation afterwards, so anyone can redraw the same shapes and
  nobody could know them in advance;
* the verdict is ``generalizes`` or ``fails on held-out shapes`` (with the
  shapes that failed); where the definition states no legal values the check
  says so and is ``skipped``.

The verdict travels in the ``rerun`` attestation's predicate as ``heldOut``;
readers read it back through ``kictl.standing`` (``held_out_verdicts``,
``generalizing``): this module is the write side.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import random
import secrets
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kictl import families
from kictl.errors import KictlError, RecordError
from kictl.families.legal import NotAxisArithmetic, legal_axes
from kictl.importers.catalogue_ranges import stated_ranges
from kictl.records import (
    DefinitionSpec,
    GeneratedInput,
    RandomInput,
    ScalarInput,
    StoredRecord,
    SynthesizedInput,
    WorkloadInput,
    WorkloadSpec,
    new_record,
)
from kictl.rerun import execute
from kictl.standing.heldout import FAILS, GENERALIZES, SKIPPED, Verdict
from kictl.store.registry import Registry
from kictl.trust.models import HeldOutCheck

#: Held-out shapes per rerun: enough to catch a shape hard-coded into a kernel, few enough to stay cheap.
DEFAULT_SHAPES = 3
#: Draws tried before giving up (each is rejected when it repeats a submitted shape or breaks a relation).
MAX_DRAWS = 400


#: The held-out check of one rerun, as its results and its ``rerun`` attestation record it (``heldOut``).
HeldOut = HeldOutCheck


class NoLegalValues(RecordError):
    """The definition does not state which axis values are legal (or no new legal shape exists)."""


def _rng(secret: str, definition: str) -> random.Random:
    seed = hashlib.sha256(f"kictl-heldout:{secret}:{definition}".encode()).digest()
    return random.Random(int.from_bytes(seed, "big"))


def draw_shapes(
    definition: StoredRecord,
    submitted: Sequence[Mapping[str, int]],
    secret: str,
    *,
    count: int = DEFAULT_SHAPES,
    cap: int | None = None,
) -> list[dict[str, int]]:
    """``count`` legal shapes (all axes) of ``definition`` that are none of the ``submitted`` ones.

    The draw is a pure function of the secret, the definition's digest, the
    submitted shapes and ``cap``, so that whoever holds the secret draws the same
    shapes again.  Each drawn axis prefers a value no submitted shape has.
    Raises ``NoLegalValues`` when a variable axis has no stated legal values,
    or when no new legal shape is found.
    """
    spec = with_stated_ranges(definition)
    legal = legal_axes(spec)
    variable = [name for name, axis in spec.axes.items() if axis.type == "var"]
    unstated = legal.unstated(variable)
    if unstated:
        raise NoLegalValues(
            f"{spec.name} states no legal values for axis {', '.join(unstated)} "
            "(constraints such as `1 <= batch_size <= 512`, docs/records.md); no held-out shapes"
        )
    drawn_axes = [axis for axis in variable if axis not in legal.derived]
    choices = {axis: legal.domains[axis].values(cap) for axis in drawn_axes}
    empty = sorted(axis for axis, values in choices.items() if not values)
    if empty:
        raise NoLegalValues(f"{spec.name}: no legal value of {', '.join(empty)}" + (f" up to {cap}" if cap else ""))
    seen = {tuple(sorted(full.items())) for full in (_complete(legal, shape) for shape in submitted) if full}
    used = {axis: {shape[axis] for shape in submitted if axis in shape} for axis in drawn_axes}
    family = families.family_for(spec.family)
    rng = _rng(secret, definition.digest)
    shapes: list[dict[str, int]] = []
    for attempt in range(MAX_DRAWS):
        fresh = attempt < MAX_DRAWS // 2  # first prefer values no submitted shape has
        drawn = {}
        for axis in drawn_axes:
            pool = [value for value in choices[axis] if value not in used[axis]] if fresh else []
            drawn[axis] = rng.choice(pool or choices[axis])
        full = _complete(legal, drawn)
        if full is None or not legal.admits(full):
            continue
        key = tuple(sorted(full.items()))
        if key in seen:
            continue
        try:
            family.check_axes(spec, full)
            families.full_axes(spec, {axis: full[axis] for axis in variable})
            family.synthesize(spec, full, 0)  # index tensors must exist for these axes
        except RecordError:
            continue
        seen.add(key)
        shapes.append(full)
        if len(shapes) == count:
            break
    if not shapes:
        raise NoLegalValues(f"{spec.name}: no legal shape outside the submitted workloads was found")
    return shapes


def with_stated_ranges(definition: StoredRecord) -> DefinitionSpec:
    """The definition's spec with the constraints kictl states for its digest joined to its own: the catalogue's
    observed ranges (``kictl.importers.catalogue_ranges``; published records are never modified).  Only the draw
    reads the result: the record and its digest are unchanged."""
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    own = tuple(spec.constraints or ())
    stated = [text for text in stated_ranges(definition.digest) if text not in own]
    if not stated:
        return spec
    return spec.model_copy(update={"constraints": (*own, *stated)})


def _complete(legal: Any, shape: Mapping[str, int]) -> dict[str, int] | None:
    try:
        full: dict[str, int] = legal.complete(shape)
    except NotAxisArithmetic:
        return None
    return full


def submitted_shapes(registry: Registry, definition: StoredRecord) -> list[dict[str, int]]:
    """The variable axes of every workload of ``definition`` in the registry (the shapes anyone could tune to)."""
    shapes = []
    for record in registry.iter_records(["Workload"]):
        spec = record.model.spec
        if isinstance(spec, WorkloadSpec) and spec.definition_digest == definition.digest:
            shapes.append(dict(spec.axes))
    return sorted(shapes, key=lambda shape: sorted(shape.items()))


def held_out_workloads(
    definition: StoredRecord, template: StoredRecord, shapes: Sequence[Mapping[str, int]], secret: str
) -> list[StoredRecord]:
    """A Workload record per shape: scalars as in ``template``, index tensors synthesised, data random.

    Every seed is drawn from the secret, so nobody could prepare for them.
    """
    spec = definition.model.spec
    template_spec = template.model.spec
    assert isinstance(spec, DefinitionSpec)
    assert isinstance(template_spec, WorkloadSpec)
    structural = set(families.family_for(spec.family).structural(spec))
    variable = [name for name, axis in spec.axes.items() if axis.type == "var"]
    rng = _rng(secret, "inputs:" + definition.digest)
    made = []
    for number, shape in enumerate(shapes):
        inputs: dict[str, WorkloadInput] = {}
        for name in spec.inputs:
            given = template_spec.inputs.get(name)
            seed = rng.randrange(2**31)
            if name in structural:
                inputs[name] = SynthesizedInput(type="synthesized", seed=seed)
            elif isinstance(given, ScalarInput):
                inputs[name] = given
            elif isinstance(given, GeneratedInput):  # the definition's entrypoint makes it for the new shape
                inputs[name] = GeneratedInput(type="generated", seed=seed)
            else:
                inputs[name] = RandomInput(type="random", seed=seed)
        workload = WorkloadSpec(
            definition_digest=definition.digest,
            axes={axis: shape[axis] for axis in variable},
            inputs=inputs,
            tolerance=template_spec.tolerance,
        )
        label = "heldout_" + "_".join(f"{axis}{shape[axis]}" for axis in variable) + f"_{number}"
        made.append(new_record(workload, name=label[:200]))
    return made


Execute = Callable[..., Any]


def check_held_out(
    definition: StoredRecord,
    implementations: Sequence[StoredRecord],
    template: StoredRecord,
    submitted: Sequence[Mapping[str, int]],
    settings: Any,
    *,
    device: str,
    timeout_s: float,
    secret: str | None = None,
    count: int = DEFAULT_SHAPES,
    cap: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, HeldOut]:
    """Run each implementation on the same held-out shapes and judge correctness only (never speed).

    Returns a ``HeldOut`` per implementation digest.  The shapes and their
    inputs come from ``secret`` (128 fresh random bits unless given).  The
    implementations run through the rerun's bench seam (``kictl.rerun.execute``)
    in a scratch registry holding only the definition, the implementations and
    the held-out workloads, with the protocol's correctness settings and one
    timed call.  A shape fails when the run's status is anything but
    ``passed``; a shape kictl could not judge (its reference failed) counts
    neither way.
    """

    secret = secret or secrets.token_hex(16)
    digests = [implementation.digest for implementation in implementations]
    try:
        shapes = draw_shapes(definition, submitted, secret, count=count, cap=cap)
    except NoLegalValues as exc:
        skipped = HeldOut(verdict=SKIPPED, secret=secret, cap=cap, note=exc.message[:2048])
        return dict.fromkeys(digests, skipped)
    workloads = held_out_workloads(definition, template, shapes, secret)
    quick = dataclasses.replace(settings, warmup=0, iterations=1, trials=1, time_budget_s=None)
    with tempfile.TemporaryDirectory(prefix="kictl-heldout-") as scratch:
        root = Path(scratch)
        (root / "registry").mkdir()
        registry = Registry(root)
        registry.add([definition, *implementations, *workloads])
        try:
            done = execute.execute(
                registry, definition, implementations, workloads, quick, device=device, timeout_s=timeout_s,
                progress=progress,
            )  # fmt: skip
        except KictlError as exc:
            note = f"not run: {exc.message}"[:2048]
            return dict.fromkeys(
                digests, HeldOut(verdict=SKIPPED, shapes=tuple(shapes), secret=secret, cap=cap, note=note)
            )
    checks: dict[str, HeldOut] = {}
    for digest in digests:
        failed: list[dict[str, Any]] = []
        judged = 0
        for shape, workload in zip(shapes, workloads, strict=True):
            executed = done.runs[(digest, workload.digest)]
            if executed.run is None:
                continue
            judged += 1
            status = executed.run.raw["spec"]["status"]
            if status != "passed":
                failed.append({"axes": shape, "status": status})
        verdict: Verdict
        if failed:
            verdict = FAILS
        elif judged:
            verdict = GENERALIZES
        else:
            verdict = SKIPPED
        note = f"{judged} of {len(shapes)} held-out shape(s) judged; correctness only"
        checks[digest] = HeldOut(
            verdict=verdict, shapes=tuple(shapes), failed=tuple(failed), secret=secret, cap=cap, note=note
        )
    return checks


#: A CPU rerun draws no axis above this (the reference runs on the CPU too).
CPU_CAP = 64


def check_jobs(
    registry: Registry,
    jobs: Sequence[Any],
    *,
    device: str,
    timeout_s: float,
    progress: Callable[[str], None] | None = None,
    secret: str | None = None,
) -> dict[str, HeldOut]:
    """The held-out check of one rerun session's jobs (one definition, one protocol): implementation -> HeldOut.

    ``secret``: the rerun request's held-out secret (``request.expected_held_out_secret``); without a request,
    a fresh one.

    ``jobs`` are ``kictl.rerun.job.RerunJob`` values of one group
    (``group_jobs``).  The submitted shapes are those of every workload of the
    definition in ``registry``.  On the CPU no drawn axis exceeds ``CPU_CAP``.
    """
    first = jobs[0]
    implementations = list({job.implementation.digest: job.implementation for job in jobs}.values())
    if progress is not None:
        progress(f"{first.definition.name}: held-out shapes")
    return check_held_out(
        first.definition,
        implementations,
        first.workload,
        submitted_shapes(registry, first.definition),
        first.settings,
        device=device,
        timeout_s=timeout_s,
        cap=CPU_CAP if device == "cpu" else None,
        progress=progress,
        secret=secret,
    )


def require_held_out(
    definition: StoredRecord,
    submitted: Sequence[Mapping[str, int]],
    held: HeldOut | None,
    *,
    secret: str,
    cap: int | None,
    count: int = DEFAULT_SHAPES,
) -> None:
    """Raise ``RecordError`` unless ``held`` is the held-out check that ``definition`` requires (the signer's rule).

    The signer re-derives it and never infers it from absence: it draws the
    shapes itself from ``secret`` (the rerun request's, ``request.expected_held_out_secret``)
    up to ``cap`` (``CPU_CAP`` for a CPU rerun, else none).  Where the definition
    states legal shapes (a draw succeeds), the result must carry a held-out check
    that discloses that secret and cap, holds exactly those shapes and was judged
    (``generalizes`` or ``fails on held-out shapes``, matching its failed shapes):
    a missing check, or one ``skipped`` with or without shapes, is refused.
    Where it states none, a check that claims shapes or a verdict is refused too.
    """
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    chosen = (
        "its held-out shapes were drawn from a secret the rerun request did not give: whoever ran the job chose them"
    )
    if held is not None and held.secret is not None and not hmac.compare_digest(held.secret, secret):
        raise RecordError(chosen)
    try:
        expected = draw_shapes(definition, submitted, secret, count=count, cap=cap)
    except NoLegalValues as exc:
        if held is not None and (held.shapes or held.verdict != SKIPPED):
            raise RecordError(
                f"it claims a held-out check ({held.verdict}, {len(held.shapes)} shape(s)) where none can be drawn: "
                f"{exc.message}"
            ) from exc
        return
    needed = f"definition {spec.name} states legal shapes, so a rerun checks {len(expected)} held-out shape(s)"
    if held is None:
        raise RecordError(f"it holds no held-out result, and {needed}: rerun with this kictl (`kictl rerun --request`)")
    if held.verdict == SKIPPED:
        what = "with no shapes" if not held.shapes else f"on {len(held.shapes)} shape(s)"
        raise RecordError(
            f"its held-out check was skipped {what} ({held.note or 'no reason given'}), and {needed}: "
            "a rerun whose held-out check did not run is not signed; rerun"
        )
    if held.secret is None:
        raise RecordError(f"its held-out check discloses no secret, and {needed}")
    if held.cap != cap:
        raise RecordError(
            f"its held-out shapes were drawn up to {held.cap if held.cap is not None else 'no cap'}; "
            f"this rerun's device draws up to {cap if cap is not None else 'no cap'}"
        )
    verify_draw(definition, submitted, held, count)


def verify_draw(
    definition: StoredRecord, submitted: Sequence[Mapping[str, int]], held: HeldOut, count: int = DEFAULT_SHAPES
) -> None:
    """Raise ``RecordError`` unless ``held``'s shapes are exactly what its secret draws (the signer's recheck)."""
    if held.verdict == SKIPPED and not held.shapes:
        return
    if held.secret is None:
        raise RecordError("the held-out check discloses no secret")
    try:
        expected = draw_shapes(definition, submitted, held.secret, count=count, cap=held.cap)
    except NoLegalValues as exc:
        raise RecordError(f"its held-out shapes cannot be drawn here: {exc.message}") from exc
    if [dict(shape) for shape in held.shapes] != expected:
        raise RecordError("its held-out shapes are not the ones its secret draws")
    failed = [item.get("axes") for item in held.failed]
    if any(axes not in expected for axes in failed):
        raise RecordError("it names a failed held-out shape that was not drawn")
    if (held.verdict == FAILS) != bool(failed):
        raise RecordError(f"its held-out verdict {held.verdict!r} does not match its failed shapes")
