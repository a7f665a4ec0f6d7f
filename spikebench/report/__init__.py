"""``spikebench report``: a sweep's results as ``report.md`` and a self-contained ``report.html``.

One type per stage: :mod:`.data` loads a results folder, or a storage URL and a study name
(the records each trial left there: :mod:`spikebench.study.records`), into a
:class:`~.data.Study`; each
module of :mod:`.sections` computes its section's info (a frozen dataclass), lays it out as
neutral :mod:`.blocks` and may draw a plot; :mod:`.markdown` and :mod:`.html` render the
blocks. The list :data:`.sections.SECTIONS` is the only place that names the sections.
"""

from __future__ import annotations

import re
from pathlib import Path

from spikebench.errors import UserError
from spikebench.report.data import Study, load_study, load_study_from_storage
from spikebench.report.sections import SECTIONS, plots, report_info

__all__ = ["UserError", "build_report", "default_out_dir", "report_dir"]


def report_dir(results_dir: str | Path, out: str | Path) -> Path:
    """``reports/<name of the results folder>``: a safe folder name whatever the study is
    called; ``results/default/`` and ``.`` resolve to their real folder names first."""
    return Path(out) / Path(results_dir).resolve().name


def _safe_name(study: str) -> str:
    """A study's name as one folder name: ``team/lr sweep`` -> ``team_lr_sweep``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", study).strip("._") or "study"
    return name[:100]


def open_study(results_dir: str | Path | None, *, storage: str | None = None,
               study: str | None = None) -> Study:
    """The study of a results folder, or of ``storage`` and ``study`` (not both)."""
    if storage is None and study is None:
        if results_dir is None:
            raise UserError("give a results folder (results/<study>), or --storage URL "
                            "--study NAME")
        return load_study(results_dir)
    if results_dir is not None:
        raise UserError(f"{results_dir}: give a results folder or --storage and --study, "
                        "not both")
    if not storage or not study:
        missing = "--study NAME" if storage else "--storage URL"
        raise UserError(f"--storage and --study go together: {missing} is missing")
    return load_study_from_storage(storage, study)


def default_out_dir(results_dir: str | Path | None, study: str | None, out: str | Path) -> Path:
    """Where the command line writes a report: ``OUT/<results folder name>``, or
    ``OUT/<study name as a safe folder name>`` for a report from a storage."""
    if results_dir is not None:
        return report_dir(results_dir, out)
    return Path(out) / _safe_name(study or "study")


def build_report(results_dir: str | Path | None, out_dir: str | Path, *,
                 storage: str | None = None, study: str | None = None) -> dict[str, Path]:
    """Write the report of ``results_dir`` (a ``results/<study>`` folder), or of study
    ``study`` in the storage at ``storage``, into ``out_dir``.

    Writes ``report.md``, the plots it links (``<name>.png``) and ``report.html`` (plots
    embedded), each atomically so a reader never sees half a file, and returns their paths by
    name (``markdown``, ``html``, one per plot). Raises :class:`UserError` when the folder
    holds no readable study.
    """
    from spikebench.report.html import render_html
    from spikebench.report.markdown import render_markdown
    from spikebench.runio import atomic_write_bytes, atomic_write_text

    loaded = open_study(results_dir, storage=storage, study=study)
    report = report_info(loaded)
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
