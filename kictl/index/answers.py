"""Transitional (issue 44): the kept answers moved to ``kictl.cli.answers``, where output is made.

``kictl/cli/rank.py``'s ``_answered`` still reads this module until it says ``kictl.cli.answers.made``
instead.  The command table already asks the kept answer before it imports ``kictl.cli.rank``, so here
nothing is read or kept: what ``_answered`` would keep is handed to ``kictl.cli.answers.made``.  Delete
this module with ``_answered``.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from kictl.cli import answers as _cli_answers
from kictl.cli.answers import Answer as Answer
from kictl.cli.answers import replay as replay

#: What ``valid_until`` was told, for ``keep`` to hand on.
_told: list[tuple[object, timedelta]] = []


def state_key(root: Path, head: str | None, command: Sequence[object]) -> str | None:
    return "kictl.cli.answers"  # the command table keyed the answer already


def read(root: Path, head: str | None, key: str) -> Answer | None:
    return None  # the command table read it already


@contextlib.contextmanager
def recording() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    yield io.StringIO(), io.StringIO()  # the command table records


def trust_texts(root: Path) -> list[str]:
    return []


def valid_until(
    made: datetime,
    *,
    stale_after: timedelta,
    answer_times: Iterable[str],
    trust_texts: Iterable[str],
    future_commits: Iterable[datetime] = (),
) -> int:
    _told[:] = [(json.loads(text), stale_after) for text in answer_times]
    return 0


def keep(root: Path, head: str | None, key: str, answer: Answer) -> None:
    for document, stale_after in _told:
        _cli_answers.made(root, document, stale_after=stale_after)
    _told.clear()
