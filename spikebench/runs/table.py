"""A table of cells -> a :class:`RunLog`, and a RunLog -> the :class:`Log` the detector scores.

Every reader ends here: CSV/JSONL columns as read, a trainer_state's log_history, a
TensorBoard or MLflow run's series laid out one row per logged value. Rows are merged by
step (a W&B or Lightning log writes a step's training row and its evaluation row apart),
the last value of a repeated step winning (a restarted run logs steps again), which the
run's note says.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.runs.columns import choose
from spikebench.runs.model import RunLog
from spikebench.runs.text import numeric
from spikebench.spikes.logs import MAX_STEP, Log, make_frame

STEP_KEY = "\0step"  # the step of formats that carry their own (TensorBoard, MLflow)
MAX_DEPTH = 32  # nesting kept in params; deeper (or recursive YAML) is cut
MAX_NODES = 100_000  # keys kept in one run's params
MAX_VALUE_NODES = 10_000  # items kept in one parameter's value (a list)


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def build(path: Path, cols: Sequence[str], cells: Mapping[str, list], *, name: str,
          fmt: str, step: str | None = None, metric: str | None = None,
          grad_metric: str | None = None, what: str = "column",
          params: dict[str, Any] | None = None, seed: int | None = None,
          note: str = "", where: str | None = None, step_name: str = "step",
          extra: Mapping[str, str] | None = None) -> RunLog:
    """The run in ``cells`` (column -> cells in row order). The step column is chosen by
    :func:`.columns.pick_step` unless the table has :data:`STEP_KEY`, a step its reader
    laid out (called ``step_name``); then ``--step`` is refused unless the reader used
    it. The other columns are chosen by :func:`.columns.choose` (``extra``: its). ``where``
    names the source in errors (default: ``path``)."""
    where = where or str(path)
    if STEP_KEY in cols:
        if step and step != step_name:
            raise UserError(f"--step {step}: {where} is a {fmt} log, whose values carry "
                            "their own steps (--step names a CSV/JSONL column)")
    choice = choose(where, cols, step_col=STEP_KEY if STEP_KEY in cols else None, step=step,
                    metric=metric, grad_metric=grad_metric, extra=extra, what=what,
                    count=lambda c: sum(not _empty(v) for v in cells[c]))
    step_col, loss_col = choice.step, choice.series[M.TRAIN_LOSS]
    grad_col = choice.series.get(M.GRAD_NORM)
    if step_col != STEP_KEY:
        step_name = step_col
    # numeric names the source in its errors as given: the run's own name where a file
    # holds several.
    values = {key: numeric(cells[col], col, where, required=key == M.TRAIN_LOSS)  # type: ignore[arg-type]
              for key, col in choice.series.items()}
    steps = numeric(cells[step_col], step_name, where, required=True)  # type: ignore[arg-type]
    by_step: dict[int, dict[str, Any]] = {}
    repeated = merge_rows(by_step, steps, values, cells[step_col], where=where,
                          label=f"{what} {step_name!r}")
    records = [by_step[k] for k in sorted(by_step)]
    if not any(M.TRAIN_LOSS in r for r in records):
        raise UserError(f"{where}: {what} {loss_col!r} has no values with a step")
    return RunLog(name=name, path=path, format=fmt, records=records, step_column=step_name,
                  loss_column=loss_col, params=params or {}, seed=seed,
                  grad_column=grad_col if any(M.GRAD_NORM in r for r in records) else None,
                  columns={M.STEP: step_name, **choice.series},
                  note="; ".join(n for n in (note, *choice.notes, _repeats(repeated)) if n))


def merge_rows(by_step: dict[int, dict[str, Any]], steps: Sequence[float | None],
               values: Mapping[str, Sequence[float | None]], raw: Sequence[Any], *,
               where: str, label: str, first_row: int = 0) -> set[int]:
    """Rows (their steps, their values by record key) merged into ``by_step``, a later
    value winning; the steps whose loss was logged again. A row with a loss needs a whole
    step in 0..2**53 - 1; a row without one (an evaluation or summary) is skipped
    without one."""
    repeated: set[int] = set()
    for i, s in enumerate(steps):
        row = {k: v[i] for k, v in values.items() if v[i] is not None}
        if not row:
            continue
        if s is None or not math.isfinite(s) or s != int(s):
            if M.TRAIN_LOSS not in row:
                continue  # an evaluation or summary row without a step: not the loss
            what_s = "missing step" if s is None else f"step {s!r} is not an integer"
            raise UserError(f"{where}: {label}, row {first_row + i + 1}: {what_s}")
        if not 0 <= s <= MAX_STEP:
            raise UserError(f"{where}: {label}, row {first_row + i + 1}: step {raw[i]!r} is "
                            "out of range (allowed: 0 to 2**53 - 1)")
        rec = by_step.setdefault(int(s), {M.STEP: int(s)})
        if M.TRAIN_LOSS in row and M.TRAIN_LOSS in rec:
            repeated.add(int(s))
        rec.update(row)
    return repeated


def _repeats(steps: set[int]) -> str:
    if not steps:
        return ""
    first = sorted(steps)[:3]
    return (f"{len(steps)} step(s) logged more than once (a restart?), e.g. "
            f"{', '.join(map(str, first))}: the last value of each read")


def series_table(series: Mapping[str, Sequence[tuple[int, float]]]
                 ) -> tuple[list[str], dict[str, list]]:
    """Columns and cells for :func:`build` from named series of (step, value), one row per
    step (the last value of a repeated step), the step in :data:`STEP_KEY`: TensorBoard
    tags, MLflow metric files."""
    by_step: dict[int, dict[str, float]] = {}
    for tag, points in series.items():
        for s, v in points:
            by_step.setdefault(s, {})[tag] = v
    order = sorted(by_step)
    cells: dict[str, list] = {STEP_KEY: order}
    for tag in series:
        cells[tag] = [by_step[s].get(tag) for s in order]
    return [STEP_KEY, *series], cells


def to_log(run: RunLog) -> Log:
    """The run as :func:`spikebench.spikes.offline.score_log` scores a log: its rows with
    a training loss; a grad norm where that step logged one (an absent one is no value, a
    logged NaN is a divergence)."""
    rows = [r for r in run.records if r.get(M.TRAIN_LOSS) is not None]
    if not rows:
        raise UserError(f"{run.path}: no training-loss values ({run.loss_column!r})")
    grad = missing = injected = None
    if run.grad_column is not None:
        grad = [r.get(M.GRAD_NORM, math.nan) for r in rows]
        missing = [M.GRAD_NORM not in r for r in rows]
    if any(M.INJECTED in r for r in rows):
        injected = [bool(r.get(M.INJECTED)) for r in rows]
    frame = make_frame([r[M.STEP] for r in rows], [r[M.TRAIN_LOSS] for r in rows], grad, missing,
                   injected)
    return Log(str(run.path), frame, run.step_column, run.loss_column, run.grad_column,
               run.note)


class _Budget:
    """Values one run's parameters may hold: a YAML or pickle can share one list many times
    over (an alias bomb), which converted naively grows without bound."""

    def __init__(self, left: int = MAX_NODES):
        self.left = left

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


def plain_value(v: Any, depth: int = 0, budget: _Budget | None = None) -> Any:
    """A parameter value as JSON can hold it: scalars kept, sequences as lists, tables as
    tables; anything else as its text, and "..." past :data:`MAX_DEPTH` or the budget."""
    budget = budget or _Budget()
    if not budget.take() or depth > MAX_DEPTH:
        return "..."
    if v is None or isinstance(v, bool | str | float):
        return v
    if isinstance(v, int):
        return v if v.bit_length() <= 256 else "..."  # JSON cannot write a huge int
    if isinstance(v, list | tuple):
        return [plain_value(x, depth + 1, budget) for x in v]
    if isinstance(v, Mapping):
        return {str(k): plain_value(x, depth + 1, budget) for k, x in v.items()}
    return str(v)[:1000]


def flatten(obj: Any, prefix: str = "", depth: int = 0,
            budget: _Budget | None = None) -> dict[str, Any]:
    """Nested tables as one level of dotted keys: ``{"optim": {"lr": 3e-3}}`` ->
    ``{"optim.lr": 3e-3}``. A level's plain values come before its tables, and each value
    has its own budget, so a bomb in one key cannot crowd out a ``seed`` beside it."""
    budget = budget or _Budget()
    if not isinstance(obj, Mapping):
        return {prefix: plain_value(obj, depth, _Budget(MAX_VALUE_NODES))} if prefix else {}
    out: dict[str, Any] = {}
    tables = []
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping) and v and depth < MAX_DEPTH:
            tables.append((key, v))
        elif budget.take():
            out[key] = plain_value(v, depth + 1, _Budget(MAX_VALUE_NODES))
    for key, v in tables:
        if budget.left > 0:
            out.update(flatten(v, key, depth + 1, budget))
    return out


def seed_of(params: Mapping[str, Any], keys: Sequence[str] = ("seed",)) -> int | None:
    """The first of ``keys`` in ``params`` holding a whole number (as a number or text)."""
    for k in keys:
        v = params.get(k)
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, int):
            x: float = v
        else:
            try:
                x = float(v)
            except (TypeError, ValueError, OverflowError):
                continue
            if not math.isfinite(x) or x != int(x):
                continue
        if abs(x) < 2**63:  # a seed any RNG takes
            return int(x)
    return None


def scalar_text(text: str) -> Any:
    """A parameter written as text (MLflow params, which the HF and Lightning loggers write
    with ``str()``) as the number or flag it spells, else the text."""
    t = text.strip()
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    if t in ("None", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    return text
