"""``spikebench report``: a sweep's results as ``report.md`` and a self-contained ``report.html``.

One type per stage: :mod:`.data` loads a results folder into a :class:`~.data.Study`; each
module of :mod:`.sections` computes its section's info (a frozen dataclass), lays it out as
neutral :mod:`.blocks` and may draw a plot; :mod:`.markdown` and :mod:`.html` render the
blocks. The list :data:`.sections.SECTIONS` is the only place that names the sections.
"""

from __future__ import annotations

from pathlib import Path

from spikebench.errors import UserError
from spikebench.report.data import load_study
from spikebench.report.sections import SECTIONS, plots, report_info

__all__ = ["UserError", "build_report"]


def build_report(results_dir: str | Path, out_dir: str | Path) -> dict[str, Path]:
    """Write the report of ``results_dir`` (a ``results/<study>`` folder) into ``out_dir``.

    Writes ``report.md``, the plots it links (``<name>.png``) and ``report.html`` (plots
    embedded), each atomically so a reader never sees half a file, and returns their paths by
    name (``markdown``, ``html``, one per plot). Raises :class:`UserError` when the folder
    holds no readable study.
    """
    from spikebench.report.html import render_html
    from spikebench.report.markdown import render_markdown
    from spikebench.runio import atomic_write_bytes, atomic_write_text

    study = load_study(results_dir)
    report = report_info(study)
    images = plots(report)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, png in images.items():
        paths[name] = out / f"{name}.png"
        atomic_write_bytes(paths[name], png)
    md = out / "report.md"
    atomic_write_text(md, render_markdown(report, {n: f"{n}.png" for n in images}))
    page = out / "report.html"
    atomic_write_text(page, render_html(report, images))
    for path in (*paths.values(), md, page):
        path.chmod(0o644)  # atomic writes start private; a report is meant to be shared
    # Plots of an earlier report that this one no longer has would be stale: drop them.
    for s in SECTIONS:
        if s.plot is not None and s.key not in images:
            (out / f"{s.key}.png").unlink(missing_ok=True)
    return {"markdown": md, "html": page, **paths}
