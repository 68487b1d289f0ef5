"""The review's name checks: names and products nobody can borrow (docs/review.md "Names", issue 29).

Records name things in ASCII (``kictl.records``), and two names that differ
only in case, separators or look-alike characters fold to one key
(``kictl.lookup.fold_name``).  A new Implementation or Definition whose
folded name is already held by a *different* record, and a new GPU product
whose folded name is another product's, fail the review (``name-taken``):
such a record would share a row label, a site page (``d/<slug>/``,
``g/<slug>/``) or a leaderboard with the one it imitates.  A Definition may
keep its own name across versions (an edited reference is a new record of
the same name, DESIGN §4): only another spelling of a held name is refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from kictl.lookup import fold_name
from kictl.records import Definition, ExecutionEnvironment, Implementation, StoredRecord
from kictl.review.state import _ReviewBase

_NAMED = ("Implementation", "Definition")


def record_names(record: StoredRecord) -> set[str]:
    """The names a record shows (its metadata name and, for named kinds, its spec's)."""
    names = {record.name}
    model = record.model
    if isinstance(model, (Implementation, Definition)):
        names.add(model.spec.name)
    return names


def product_of(record: StoredRecord) -> str | None:
    model = record.model
    return model.spec.hardware.product if isinstance(model, ExecutionEnvironment) else None


class _NameChecks(_ReviewBase):
    """``name-taken``: a new record or product borrowing another's folded name."""

    def _held(self, new: set[str]) -> Iterable[StoredRecord]:
        """Every Implementation, Definition and ExecutionEnvironment of base or head that is not new."""
        digests = [
            digest
            for digest, kind in self.known.items()
            if kind in (*_NAMED, "ExecutionEnvironment") and digest not in new
        ]
        self.preload(digests)
        for digest in sorted(digests):
            record = self.record(digest)
            if record is not None:
                yield record

    def _names(self, new_records: list[tuple[str, StoredRecord]]) -> None:
        new = {record.digest for _, record in new_records}
        held: dict[tuple[str, str], tuple[StoredRecord, str]] = {}  # (kind, folded) -> (record, name)
        products: dict[str, str] = {}  # folded product -> product
        for record in self._held(new):
            product = product_of(record)
            if product is not None:
                products.setdefault(fold_name(product), product)
                continue
            for name in record_names(record):
                held.setdefault((record.kind, fold_name(name)), (record, name))
        for path, record in sorted(new_records, key=lambda item: item[0]):
            product = product_of(record)
            if product is not None:
                folded = fold_name(product)
                known = products.setdefault(folded, product)
                if known != product:
                    self.lint(
                        "name-taken",
                        f"GPU product {product!r} reads as {known!r}, a product the registry already has "
                        f"(both fold to {folded!r}); name the product as the registry does",
                        path,
                    )
                continue
            if record.kind not in _NAMED:
                continue
            for name in sorted(record_names(record)):
                folded = fold_name(name)
                owner = held.get((record.kind, folded))
                if owner is None:
                    held[(record.kind, folded)] = (record, name)
                    continue
                other, other_name = owner
                if other.digest == record.digest:
                    continue
                if record.kind == "Definition" and other_name == name:
                    continue  # a new version of a definition keeps its name
                self.lint(
                    "name-taken",
                    f"{record.kind} name {name!r} is taken: {other_name!r} ({other.digest[:19]}) folds to the same "
                    f"{folded!r}; a different record needs a name of its own",
                    path,
                )
