"""The neutral blocks of a report (headings, paragraphs, lists, tables, images) and the number
formats of their cells.

Sections lay their data out once, as blocks; :mod:`.markdown` and :mod:`.html` only render
them. Every text here is raw text, never markup: each renderer escapes every span and cell,
so a user's string (a study or arm name, an error message) cannot become markup in either.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DASH = "—"


@dataclass(frozen=True)
class Span:
    text: str
    bold: bool = False


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass(frozen=True)
class Para:
    spans: list[Span]


@dataclass(frozen=True)
class Bullets:
    items: list[list[Span]]


@dataclass(frozen=True)
class Image:
    name: str
    alt: str


@dataclass(frozen=True)
class Cell:
    """A cell's text (a newline is a line break in both renderers) and the key a sortable
    HTML table sorts it by (numbers sort as such; None sorts last)."""

    text: str
    sort: float | str | None = None


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[Cell]]
    sortable: bool = False
    numeric: list[bool] = field(default_factory=list)  # right-align these columns
    detail: str = ""  # a detail table's title: HTML folds it under this, markdown heads it


Block = Heading | Para | Bullets | Table | Image


def para(*parts: str | Span) -> Para:
    """A paragraph of plain strings and (bold) spans."""
    return Para([x if isinstance(x, Span) else Span(x) for x in parts])


def unavailable(reason: str) -> list[Block]:
    """What a section that cannot be computed shows instead of its body."""
    return [para(Span("Not available: ", True), reason)]


def notes(texts: list[str]) -> list[Block]:
    """Caveats under a table, one bullet each; none: no block."""
    return [Bullets([[Span(n)] for n in texts])] if texts else []


def image(name: str, alt: str, images: set[str] | frozenset[str]) -> list[Block]:
    """The plot ``name`` if it was drawn; else nothing (the section's tables still show)."""
    return [Image(name, alt)] if name in images else []


def num(x: Any) -> str:
    """A number for a table: about 3 significant digits, no exponent for everyday sizes;
    None/NaN/non-numbers: a dash; infinities: ±inf."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return DASH if x is None else str(x)
    if math.isnan(x):
        return DASH
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    a = abs(x)
    if a == 0:
        return "0"
    if float(x).is_integer() and a < 1e15:
        return f"{int(x):,}"  # a whole number reads the same whatever its type: 12, not 12.0
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 0.01:
        return f"{x:.3g}"
    return f"{x:.2e}"


def signed(x: Any, fmt: Callable[[Any], str] = num) -> str:
    text = fmt(x)
    return "+" + text if isinstance(x, int | float) and x > 0 and not text.startswith("+") \
        else text


def pct(x: Any, *, sign: bool = False) -> str:
    if not isinstance(x, int | float) or isinstance(x, bool) or math.isnan(x):
        return DASH
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    text = f"{100 * x:.0f}%"
    return ("+" + text) if sign and x > 0 else text


def points(x: Any) -> str:
    """A difference of two rates in percentage points: ``+33 pp``."""
    if not isinstance(x, int | float) or isinstance(x, bool) or math.isnan(x):
        return DASH
    return f"{100 * x:+.0f} pp" if x else "0 pp"


def interval(m: dict[str, Any] | None, fmt: Callable[[Any], str] = num, *,
             explain: bool = True) -> str:
    """``value [lo, hi]``; without an interval (never a zero-width one), the value and,
    with ``explain``, why there is none; no value: a dash."""
    if not m or m.get("value") is None:
        return DASH
    lo, hi = m.get("lo"), m.get("hi")
    if lo is None or hi is None or lo == hi:
        if not explain:
            return f"{fmt(m['value'])} (no interval)"
        why = m.get("why") or ("one seed" if m.get("n", 0) <= 1 else "no spread")
        return f"{fmt(m['value'])} (no 95% interval: {why})"
    return f"{fmt(m['value'])} [{fmt(lo)}, {fmt(hi)}]"


def delta(d: dict[str, Any] | None, fmt: Callable[[Any], str] = signed, *,
          explain: bool = True) -> str:
    """A paired difference vs the baseline as a cell's extra line: ``Δ value [lo, hi], n
    matched`` (two independent groups: ``n vs m unpaired``); "" where there is none (the
    baseline's own row)."""
    if d is None:
        return ""
    if d.get("paired") is False:  # two independent groups of runs (spikebench compare)
        if d.get("value") is None:
            return "\nΔ vs baseline: a group has no values"
        return f"\nΔ {interval(d, fmt, explain=explain)}, {d['n']} vs {d.get('m')} unpaired"
    if d.get("value") is None:
        return "\nΔ vs baseline: no matched seeds"
    return f"\nΔ {interval(d, fmt, explain=explain)}, {d['n']} matched"
