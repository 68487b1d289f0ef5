"""HTML building blocks for the site: escaping, the page frame, tables, small formatters.

Every dynamic string reaches the page through ``esc`` (``html.escape`` with
quotes): the site is plain string building over the standard library, no
template engine, so there is one rule to check rather than an engine's
auto-escaping settings.  Links are always relative to the page that holds
them (``rel``), so the site works from any base path (a GitHub Pages project
site, ``python -m http.server``, a file system).

Figures (latency, energy, power, ratios, dates, digests) are written by
``kictl.render``, the CLI's formatters, so a page and ``kictl leaderboard``
print the same text for the same figure (999,700 ns is ``1.00 ms`` in both).
The one difference is typography for *no* value: the site writes an en dash
(``NONE``) where the CLI writes ``-``.
"""

from __future__ import annotations

import html
import posixpath
import re
from collections.abc import Iterable, Sequence

from kictl import render
from kictl.render import short as short
from kictl.render import times as times

SITE_NAME = "KernelIndex"


def esc(value: object) -> str:
    """``value`` as HTML text, quotes included (safe inside attributes)."""
    return html.escape(str(value), quote=True)


def rel(from_page: str, to_path: str) -> str:
    """A relative link from the page at ``from_page`` (a site path such as ``d/x/index.html``) to ``to_path``.

    The result never starts with a segment holding a colon (``sha256:…``), which a
    browser would take for a URL scheme: such links get a leading ``./``.
    """
    base = posixpath.dirname(from_page) or "."
    target = posixpath.relpath(to_path, base)
    if target.endswith("index.html"):
        target = target[: -len("index.html")] or "./"
    if ":" in target.split("/", 1)[0]:
        target = "./" + target
    return target


def slug(text: str) -> str:
    """A path segment for a name: lower-case ASCII letters, digits, ``.``, ``_`` and ``-``."""
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-")
    return cleaned or "x"


#: What the site shows where there is no value (the CLI's ``-``).
NONE = "–"


def latency(value: float | None) -> str:
    """``render.latency`` (``812 ns``, ``1.00 ms``), ``NONE`` for none."""
    return NONE if value is None else render.latency(value)


#: A floor is a latency and reads as one, as on ``kictl leaderboard``'s "floor …" line.
floor_ns = latency


def joules(value: float | None) -> str:
    """``render.joules`` (``812 µJ``, ``2.31 mJ``), ``NONE`` for none."""
    return NONE if value is None else render.joules(value)


def ratio(value: float | None, digits: int = 2) -> str:
    """``render.ratio`` (``1.25×``), ``NONE`` for none."""
    return NONE if value is None else render.ratio(value, digits)


def speedup(geomean: float | None, workloads: int) -> str:
    """``render.speedup`` (``1.25× (4)``), ``NONE`` for none."""
    return NONE if geomean is None else render.speedup(geomean, workloads)


def date(timestamp: str | None) -> str:
    """``render.date`` (``2026-11-30``), ``NONE`` for none."""
    return render.date(timestamp) if timestamp else NONE


def code(text: object) -> str:
    return f"<code>{esc(text)}</code>"


def link(from_page: str, to_path: str, text: str, *, raw: bool = False) -> str:
    """``<a>`` to a site path; ``text`` is escaped unless ``raw``."""
    return f'<a href="{esc(rel(from_page, to_path))}">{text if raw else esc(text)}</a>'


def badge(label: str, kind: str) -> str:
    """A small label: evidence levels and warnings (``tampered``, ``unsigned``, ``stale``)."""
    return f'<span class="badge {esc(kind)}">{esc(label)}</span>'


def table(
    caption: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    numeric: Sequence[int] = (),
    row_header: int | None = 0,
    table_id: str | None = None,
) -> str:
    """A data table in a scrolling region; cells are HTML already (escape before).

    ``numeric`` columns are right-aligned; column ``row_header`` is a ``<th scope=row>``.
    """
    ident = f' id="{esc(table_id)}"' if table_id else ""
    head = "".join(
        f'<th scope="col"{" class=num" if index in numeric else ""}>{esc(name)}</th>'
        for index, name in enumerate(headers)
    )
    body = []
    for row in rows:
        cells = []
        for index, cell in enumerate(row):
            cls = ' class="num"' if index in numeric else ""
            if index == row_header:
                cells.append(f'<th scope="row"{cls}>{cell}</th>')
            else:
                cells.append(f"<td{cls}>{cell}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="scroll" role="region" aria-label="{esc(caption)}" tabindex="0">'
        f"<table{ident}><caption>{esc(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def deflist(items: Iterable[tuple[str, str]]) -> str:
    """``<dl>`` of (term, HTML description) pairs."""
    return "<dl>" + "".join(f"<dt>{esc(term)}</dt><dd>{value}</dd>" for term, value in items) + "</dl>"


def page(
    path: str,
    title: str,
    body: str,
    *,
    crumbs: Sequence[tuple[str, str]] = (),
    documents: Sequence[tuple[str, str]] = (),
    canonical: str | None = None,
    footer: str = "",
) -> str:
    """A whole HTML page at site path ``path``.

    ``crumbs`` are (site path, label) pairs leading to this page; ``documents``
    are (file name beside the page, what it is) pairs: its JSON.
    """
    nav = [link(path, "index.html", SITE_NAME)]
    nav.extend(link(path, target, label) for target, label in crumbs)
    trail = " <span aria-hidden=true>›</span> ".join(nav)
    docs = ""
    if documents:
        items = "".join(
            f'<li><a href="{esc(rel(path, posixpath.join(posixpath.dirname(path), name)))}" type="application/json">'
            f"{esc(name)}</a>: {esc(what)}</li>"
            for name, what in documents
        )
        docs = f'<section aria-labelledby="json"><h2 id="json">This page as JSON</h2><ul>{items}</ul></section>'
    canonical_link = f'<link rel="canonical" href="{esc(canonical)}">' if canonical else ""
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · {SITE_NAME}</title>"
        f'<link rel="stylesheet" href="{esc(rel(path, "style.css"))}">{canonical_link}</head>\n'
        '<body><a class="skip" href="#main">Skip to content</a>'
        f'<header><nav aria-label="Breadcrumb">{trail}</nav></header>\n'
        f'<main id="main"><h1>{esc(title)}</h1>\n{body}\n{docs}</main>\n'
        f"<footer>{footer}</footer></body></html>\n"
    )
