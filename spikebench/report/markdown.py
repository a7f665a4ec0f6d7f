"""The report as markdown: GitHub-flavoured tables (tabulate), plots as sibling PNG files.

Every span and cell goes through :func:`md_escape`, whoever wrote it: ``|`` cannot end a
table cell, ``<``/``>`` cannot open an HTML tag, and backticks, ``*`` and brackets cannot
start code, emphasis or links. A user's string therefore shows as itself in any viewer.
"""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from spikebench.report import blocks as bl
from spikebench.report.sections import Report, document

_ESCAPES = {"\\": "\\\\", "`": "\\`", "|": "\\|", "*": "\\*", "[": "\\[", "]": "\\]",
            "<": "&lt;", ">": "&gt;"}


def md_escape(text: Any, *, cell: bool = False) -> str:
    """Escape text for markdown; ``cell``: a newline becomes ``<br>`` (a line break inside a
    table cell), else a space (markdown would end the paragraph or the row). Carriage
    returns are dropped."""
    s = "".join(_ESCAPES.get(ch, ch) for ch in str(text).replace("\r", ""))
    return s.replace("\n", "<br>" if cell else " ")


def _spans(spans: list[bl.Span]) -> str:
    # Bold markers go outside the escaped text, and never around blank text (** ** is
    # literal asterisks in markdown).
    out = []
    for s in spans:
        text = md_escape(s.text)
        if s.bold and text.strip():
            lead, core, trail = text[:len(text) - len(text.lstrip())], text.strip(), \
                text[len(text.rstrip()):]
            text = f"{lead}**{core}**{trail}"
        out.append(text)
    return "".join(out)


def md_table(table: bl.Table) -> str:
    if not table.rows:
        return "_(no rows)_"
    rows = [[md_escape(c.text, cell=True) for c in row] for row in table.rows]
    numeric = table.numeric or [False] * len(table.columns)
    return tabulate(rows, headers=[md_escape(c) for c in table.columns], tablefmt="github",
                    disable_numparse=True,
                    colalign=["right" if n else "left" for n in numeric])


def render_block(block: bl.Block, images: dict[str, str]) -> str:
    if isinstance(block, bl.Heading):
        return "#" * block.level + " " + md_escape(block.text)
    if isinstance(block, bl.Para):
        return _spans(block.spans)
    if isinstance(block, bl.Bullets):
        return "\n".join("- " + _spans(item) for item in block.items)
    if isinstance(block, bl.Table):
        head = f"**{md_escape(block.detail)}**\n\n" if block.detail else ""
        return head + md_table(block)
    if isinstance(block, bl.Image):
        return f"![{md_escape(block.alt)}]({images[block.name]})"
    raise TypeError(f"unknown block {type(block).__name__}")


def render_markdown(report: Report, images: dict[str, str] | None = None) -> str:
    """The whole report; ``images`` maps plot names to file names beside the markdown (a
    plot without a file is left out)."""
    images = images or {}
    blocks = document(report, set(images))
    return "\n\n".join(render_block(b, images) for b in blocks) + "\n"
