"""``spikebench report``: a sweep's results as ``report.md`` and a self-contained ``report.html``.

Layers, each testable alone: :mod:`.data` loads a results folder, :mod:`.sections` computes
each section's data with pure ``*_info`` functions (statistics in :mod:`.stats`, the
article's claims in :mod:`.claims`), :mod:`.layout` arranges them as neutral blocks,
:mod:`.markdown` and :mod:`.html` render the blocks and :mod:`.plots` draws PNGs.
"""

from __future__ import annotations

from pathlib import Path

from spikebench.errors import UserError
from spikebench.report.data import load_study
from spikebench.report.sections import report_info

__all__ = ["UserError", "build_report"]


def build_report(results_dir: str | Path, out_dir: str | Path) -> dict[str, Path]:
    """Write the report of ``results_dir`` (a ``results/<study>`` folder) into ``out_dir``.

    ``out_dir`` is the report's own folder (``spikebench report`` passes
    ``reports/<results folder name>``); it is created if needed. Writes ``report.md``, the
    plots it links (``<name>.png``) and ``report.html`` (plots embedded), each atomically,
    and returns their paths by name (``markdown``, ``html``, and one per plot). Raises
    :class:`UserError` when the folder holds no readable study.
    """
    from spikebench.report import plots
    from spikebench.report.html import render_html
    from spikebench.report.markdown import render_markdown
    from spikebench.runio import atomic_write_text

    study = load_study(results_dir)
    report = report_info(study)
    images = plots.render_all(report)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, png in images.items():
        path = out / f"{name}.png"
        tmp = out / f".{name}.png.tmp"
        tmp.write_bytes(png)
        tmp.replace(path)
        paths[name] = path
    md = out / "report.md"
    atomic_write_text(md, render_markdown(report, {n: f"{n}.png" for n in images}))
    page = out / "report.html"
    atomic_write_text(page, render_html(report, images))
    for path in (md, page):
        path.chmod(0o644)  # atomic writes start private; a report is meant to be shared
    # Plots of an earlier report that this one no longer has would be stale: drop them.
    for name in plots.RENDERERS:
        if name not in images:
            (out / f"{name}.png").unlink(missing_ok=True)
    return {"markdown": md, "html": page, **paths}
