"""One way to find a record from what a user types: a digest, a digest prefix or a name.

Every command that takes a record on its command line (``show``, ``verify``,
``sign``, ``diff``, ``cite``, ``history``, ``leaderboard``, ``floor``,
``bench --workload``, ``rerun``) resolves it here, in one order:

1. ``sha256:<hex>`` or bare hex of at least ``MIN_PREFIX`` (8) digits is a
   digest prefix (git-like): one match is the answer, several are an
   ambiguity (exit 3, with the candidates).  ``sha256:`` with fewer digits is
   refused; with no match, a ``sha256:`` reference is unknown, bare hex goes on
   to the names (a name may be hex).  Bare hex of ``SHORT_PREFIX`` (4) to 7
   digits that is no record's name but the start of some digest is refused
   the same way ("needs at least 8 hex digits"), never answered with unrelated
   "closest known" names; shorter hex (``b3``, a workload label) is a name.
2. An exact name (a Definition's alias, a Workload's label, ...).  Several
   records of that name are an ambiguity.
3. A unique prefix of ``MIN_PREFIX`` or more characters of a name (workload
   labels imported from other harnesses are uuids, which people abbreviate).
4. Otherwise ``NotFoundError`` naming the closest known names.

Where the records live differs (files under ``registry/records/``, the SQLite
query index, a list already in memory), so the search is behind the small
``Catalogue`` interface and this module holds only the order and the messages.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kictl.errors import NotFoundError

MIN_PREFIX = 8
#: Hex this long (and under ``MIN_PREFIX``) that starts a digest is taken as a digest abbreviated too far.
SHORT_PREFIX = 4
DIGEST_PREFIX = "sha256:"
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class Match:
    """One record a reference may name."""

    digest: str
    name: str
    kind: str = ""


class Catalogue(Protocol):
    """The records a reference is resolved among."""

    def by_digest_prefix(self, hex_prefix: str) -> list[Match]:
        """Records whose digest's hex starts with ``hex_prefix`` (lowercase, ``MIN_PREFIX``+ digits)."""
        ...

    def by_name(self, name: str) -> list[Match]:
        """Records named exactly ``name``."""
        ...

    def by_name_prefix(self, prefix: str) -> list[Match]:
        """Records whose name starts with ``prefix`` (``MIN_PREFIX``+ characters)."""
        ...

    def names(self) -> list[str]:
        """Every name, for "closest known" hints."""
        ...


def hex_prefix(reference: str) -> str | None:
    """The lowercase hex of a reference that reads as a digest prefix (``MIN_PREFIX``+ digits), else ``None``."""
    bare = reference.removeprefix(DIGEST_PREFIX).lower()
    if len(bare) >= MIN_PREFIX and _HEX.issuperset(bare):
        return bare
    return None


def _short_hex(reference: str) -> bool:
    """Hex too short for a digest prefix but long enough to be meant as one (``4bcff5``, not ``b3``)."""
    return SHORT_PREFIX <= len(reference) < MIN_PREFIX and _HEX.issuperset(reference.lower())


def _too_short(reference: str) -> str:
    digits = len(reference.removeprefix("sha256:"))
    return f"{reference}: a digest prefix needs at least {MIN_PREFIX} hex digits ({digits} given)"


def closest(word: str, known: Sequence[str]) -> list[str]:
    """Up to five known names close to ``word``, for "did you mean" messages."""
    return difflib.get_close_matches(word, known, n=5, cutoff=0.5)


def _described(matches: Iterable[Match]) -> list[str]:
    out = []
    for m in matches:
        about = " ".join(part for part in (m.kind, m.name) if part)
        out.append(f"{m.digest} ({about})" if about else m.digest)
    return out


def resolve(reference: str, catalogue: Catalogue, *, what: str = "record") -> Match:
    """The one record ``reference`` names among ``catalogue`` (see the module's order).

    ``what`` names the kind of thing sought in messages (``definition``,
    ``workload``, ``record``).  Raises ``NotFoundError`` (exit 3) for an unknown
    or ambiguous reference.
    """
    bare = hex_prefix(reference)
    if bare is None and reference.startswith(DIGEST_PREFIX):
        raise NotFoundError(_too_short(reference))
    if bare is not None:
        found = catalogue.by_digest_prefix(bare)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise NotFoundError(f"{what} digest prefix {reference} is ambiguous", candidates=_described(found[:20]))
        if reference.startswith(DIGEST_PREFIX):
            raise NotFoundError(f"no {what} with digest {reference}")
    named = catalogue.by_name(reference)
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        raise NotFoundError(
            f"{what} name {reference!r} names {len(named)} records; give a digest",
            candidates=_described(named[:20]),
        )
    if _short_hex(reference):
        starts = catalogue.by_digest_prefix(reference.lower())
        if starts:
            raise NotFoundError(
                _too_short(reference),
                details=[
                    f"{len(starts)} digest(s) start with {reference}, e.g. {starts[0].digest[:19]}…: "
                    f"give 8 or more of its hex digits (no {what} is named {reference!r})"
                ],
            )
    candidates: list[str] = []
    if len(reference) >= MIN_PREFIX:
        prefixed = catalogue.by_name_prefix(reference)
        if len(prefixed) == 1:
            return prefixed[0]
        candidates = _described(prefixed[:20])
    names = sorted(set(catalogue.names()))
    near = closest(reference, names)
    details = [f"closest known: {', '.join(near)}"] if near else []
    if not near and not candidates and names and len(names) <= 12:
        details = [f"known: {', '.join(names)}"]
    raise NotFoundError(f"no {what} named or digested {reference!r}", candidates=candidates, details=details)


class ListCatalogue:
    """A catalogue over records already in memory."""

    def __init__(self, matches: Iterable[Match]) -> None:
        self.matches = list(matches)

    def by_digest_prefix(self, hex_prefix: str) -> list[Match]:
        return [m for m in self.matches if m.digest.removeprefix(DIGEST_PREFIX).startswith(hex_prefix)]

    def by_name(self, name: str) -> list[Match]:
        return [m for m in self.matches if m.name == name]

    def by_name_prefix(self, prefix: str) -> list[Match]:
        return [m for m in self.matches if m.name.startswith(prefix)]

    def names(self) -> list[str]:
        return [m.name for m in self.matches]


class Named(Protocol):
    """Anything with a digest, a name and a kind (``records.StoredRecord``, for one)."""

    @property
    def digest(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...


NamedT = TypeVar("NamedT", bound=Named)


def resolve_among(reference: str, candidates: Sequence[NamedT], *, what: str = "record") -> NamedT:
    """The one of ``candidates`` that ``reference`` names, in ``resolve``'s order; raises ``NotFoundError``."""
    match = resolve(reference, ListCatalogue(Match(c.digest, c.name, c.kind) for c in candidates), what=what)
    return next(c for c in candidates if c.digest == match.digest)


# --------------------------------------------------------------------------- folded names

_SEPARATORS = frozenset(" -_.:/+")
#: ASCII characters a reader easily takes for one another, each folded to one representative (after lowering
#: case): a name that folds to another record's folded name would borrow that record's row label or page.
_FOLDS = {"0": "o", "1": "l", "i": "l", "|": "l", "5": "s", "2": "z", "8": "b"}


def fold_name(name: str) -> str:
    """The folded form of a record name or GPU product: what two names must not share (docs/review.md).

    Names and products are ASCII (``kictl.records``), so no Unicode skeleton is
    needed: case is dropped, separators (space ``-`` ``_`` ``.`` ``:`` ``/`` ``+``)
    are dropped, ``rn`` reads as ``m`` and ``vv`` as ``w``, and the digits and
    letters that look alike fold together (``0``/``o``, ``1``/``l``/``i``/``|``,
    ``5``/``s``, ``2``/``z``, ``8``/``b``).  Any character outside ASCII is kept
    as it is, so a non-ASCII name never folds onto an ASCII one by accident
    (records refuse them anyway).
    """
    text = "".join(char for char in name.lower() if char not in _SEPARATORS)
    text = text.replace("rn", "m").replace("vv", "w")
    return text.translate({ord(key): value for key, value in _FOLDS.items()})
