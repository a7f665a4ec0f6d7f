"""Long-format CSV: one row per step and tag, ``step,tag,value`` (tbparse's
``SummaryReader(...).scalars``, TensorBoard and W&B exporters), optionally ``wall_time``
and a run column (tbparse's ``dir_name``, or ``run``) where the file holds several runs.

Each tag is its own series; the loss is the tag :mod:`.columns` names (or ``--metric``),
never the ``value`` column as a whole: read as one series, the last row of each step
wins, and that is whatever tag was logged last (a Trainer's ``train_steps_per_second``).
Each run is read under its own name.
"""

from __future__ import annotations

import math
from pathlib import Path

from spikebench.errors import UserError
from spikebench.runs import columns
from spikebench.runs.model import RunLog
from spikebench.runs.table import build, series_table
from spikebench.runs.text import numeric, read_table

FORMAT = "long-csv"
RUN_COLUMNS = ("dir_name", "run")


def read(path: Path, *, name: str, prefix: str = "", step: str | None = None,
         metric: str | None = None, grad_metric: str | None = None,
         extra: dict[str, str] | None = None) -> list[RunLog]:
    """Every run in the file: one, called ``name``, or one per value of the run column,
    called ``<prefix><run>``."""
    cols, cells = read_table(path)
    tag_col, value_col = columns.find(cols, ("tag",))[0], columns.find(cols, ("value",))[0]
    run_col = next(iter(columns.find(cols, RUN_COLUMNS)), None)
    others = [c for c in cols if c not in (tag_col, value_col, run_col)]
    step_col, note = columns.pick_step(str(path), others, step)
    steps = numeric(cells[step_col], step_col, path, required=True)
    values = numeric(cells[value_col], value_col, path, required=True)
    runs: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for i, (tag, s, v) in enumerate(zip(cells[tag_col], steps, values, strict=True)):
        if v is None:
            continue
        if s is None or not math.isfinite(s) or s != int(s):
            raise UserError(f"{path}: column {step_col!r}, row {i + 1}: "
                            + ("missing step" if s is None else f"step {s!r} is not an integer"))
        run = "" if run_col is None else str(cells[run_col][i] or "")
        runs.setdefault(run, {}).setdefault(str(tag), []).append((int(s), v))
    if not runs:
        raise UserError(f"{path}: column {value_col!r} has no values")
    out = []
    for run, series in runs.items():
        tcols, tcells = series_table(series)
        where = f"{path}, run {run!r}" if run_col is not None else str(path)
        out.append(build(path, tcols, tcells, fmt=FORMAT,
                         name=f"{prefix}{run}" if run_col is not None else name,
                         step=step, metric=metric, grad_metric=grad_metric, extra=extra,
                         what="tag",
                         note=note, where=where, step_name=step_col))
    return out
