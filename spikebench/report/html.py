"""The report as one self-contained HTML page: inline CSS, a tiny inline table sorter, plots
as ``data:`` URIs, nothing fetched from anywhere, so the file can be mailed or attached.

Every span and cell is ``html.escape``d, whoever wrote it. As a second line of defence a
Content-Security-Policy loads nothing but ``data:`` images and runs only the style and script
blocks whose SHA-256 hashes it lists, so even an unescaped ``<script>`` could not execute.
"""

from __future__ import annotations

import base64
import hashlib
import html
from typing import Any

from spikebench.report import blocks as bl
from spikebench.report.sections import Report, document, headings

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto;
       max-width: 1400px; padding: 0 16px; color: #1b1f24; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1.05em; margin-bottom: 0.3em; }
nav { font-size: 0.9em; margin: 0.8em 0; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 12.5px; }
th, td { border: 1px solid #d0d7de; padding: 3px 7px; vertical-align: top; text-align: left; }
th { background: #f3f5f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #fafbfc; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sortable th[aria-sort=descending]::after { content: " \\25BC"; }
img { max-width: 100%; height: auto; display: block; margin: 0.6em 0; }
.wrap { overflow-x: auto; }
""".strip()

# Sorts a table.sortable by a clicked (or Enter/Space on a focused) header: numbers as
# numbers, text as text, empty cells last in both directions.
SORT_JS = """
(function () {
  function key(td) {
    var v = td.getAttribute("data-sort");
    if (v === null) { v = td.textContent; }
    if (v === "") { return null; }
    var n = Number(v);
    return isNaN(n) ? v : n;
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      function sort() {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
          var c = (typeof x === "number" && typeof y === "number") ? x - y
            : String(x).localeCompare(String(y));
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); }
      });
    });
  });
})();
""".strip()


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CSP = ("default-src 'none'; img-src data:; base-uri 'none'; form-action 'none'; "
       f"style-src {_sha(CSS)}; script-src {_sha(SORT_JS)}")


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _cell_text(text: str) -> str:
    return "<br>".join(esc(line) for line in str(text).split("\n"))


def _sort_attr(v: Any) -> str:
    if v is None:
        return ' data-sort=""'
    if isinstance(v, bool):
        return f' data-sort="{int(v)}"'
    if isinstance(v, int | float):
        # Non-finite numbers sort as text would misplace them; make them extreme numbers.
        if v != v:
            return ' data-sort=""'
        if v in (float("inf"), float("-inf")):
            return f' data-sort="{"1e308" if v > 0 else "-1e308"}"'
        return f' data-sort="{v!r}"'
    return f' data-sort="{esc(v)}"'


def html_table(table: bl.Table) -> str:
    numeric = table.numeric or [False] * len(table.columns)
    cls = ' class="sortable"' if table.sortable else ""
    head = "".join(f'<th scope="col">{esc(c)}</th>' for c in table.columns)
    body = []
    for row in table.rows:
        tds = []
        for cell, is_num in zip(row, numeric, strict=False):
            attrs = ' class="num"' if is_num else ""
            if table.sortable:
                attrs += _sort_attr(cell.sort if cell.sort is not None else
                                    (None if cell.text == bl.DASH else cell.text))
            tds.append(f"<td{attrs}>{_cell_text(cell.text)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    if not table.rows:
        return "<p><em>(no rows)</em></p>"
    return (f'<div class="wrap"><table{cls}><thead><tr>{head}</tr></thead><tbody>\n'
            + "\n".join(body) + "\n</tbody></table></div>")


def _spans(spans: list[bl.Span]) -> str:
    return "".join(f"<strong>{esc(s.text)}</strong>" if s.bold else esc(s.text) for s in spans)


def render_block(block: bl.Block, images: dict[str, bytes]) -> str:
    if isinstance(block, bl.Heading):
        anchor = f' id="{esc(block.anchor)}"' if block.anchor else ""
        return f"<h{block.level}{anchor}>{esc(block.text)}</h{block.level}>"
    if isinstance(block, bl.Para):
        return f"<p>{_spans(block.spans)}</p>"
    if isinstance(block, bl.Bullets):
        return "<ul>" + "".join(f"<li>{_spans(i)}</li>" for i in block.items) + "</ul>"
    if isinstance(block, bl.Table):
        if block.detail:
            return (f"<details><summary>{esc(block.detail)}</summary>\n{html_table(block)}"
                    "\n</details>")
        return html_table(block)
    if isinstance(block, bl.Image):
        data = base64.b64encode(images[block.name]).decode("ascii")
        return f'<img src="data:image/png;base64,{data}" alt="{esc(block.alt)}">'
    raise TypeError(f"unknown block {type(block).__name__}")


def render_html(report: Report, images: dict[str, bytes] | None = None) -> str:
    """The whole report as one page; ``images`` maps plot names to PNG bytes."""
    images = images or {}
    blocks = document(report, set(images))
    nav = " ".join(f'<a href="#{key}">{esc(title)}</a>' for key, title in headings(report))
    parts = []
    for i, b in enumerate(blocks):
        parts.append(render_block(b, images))
        if i == 0:  # after the title
            parts.append(f"<nav>{nav}</nav>")
    title = esc(f"Spike report: {report['header'].study}")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(parts)
            + f"\n<script>{SORT_JS}</script>\n</body>\n</html>\n")
