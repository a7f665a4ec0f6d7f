"""Reading training logs (CSV or JSONL) into a tidy step/loss/grad_norm table.

Accepted inputs:

- JSONL (``.jsonl``/``.ndjson``/``.json``, or any file whose first non-blank character is
  ``{``): one flat JSON object per line, e.g. our own ``metrics.jsonl``. Blank lines are
  skipped; rows without the loss (eval-only lines) are skipped.
- CSV (anything else; ``.tsv`` is tab-separated): W&B and TensorBoard exports and other
  frameworks' logs.

Columns are matched case-insensitively. Step: ``step``, ``_step``, ``global_step`` (in that
order). Loss: ``--metric`` if given, else ``loss``, ``train/loss``, ``train_loss``, then a
W&B export column ``<run> - train/loss`` (not its ``__MIN``/``__MAX`` companions), then a
TensorBoard-style ``value``. Grad norm (optional): ``grad_norm``, ``optim/grad_norm``,
``train/grad_norm``. Values that read as numbers (including ``nan``/``inf``) are kept;
anything else is an error naming the file, the column, the row and the value, as are steps
past 0..2**53 - 1 (floats stop being exact) and a CSV row of the wrong width. Rows are
sorted by step; for repeated steps (a resumed run) the last row wins.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported where a log is read: the train loop needs none
    import pandas as pd

from spikebench import metrics as M
from spikebench.errors import UserError

STEP_NAMES = ("step", "_step", "global_step")
LOSS_NAMES = ("loss", M.TRAIN_LOSS, "train_loss")
GRAD_NAMES = ("grad_norm", M.GRAD_NORM, "train/grad_norm")
MAX_STEP = 2**53 - 1  # the largest step a float (pandas, plots) still holds exactly
# Longer integers are past a float's range (and near Python's 4,300-digit parsing limit):
# damage, not a value.
MAX_INT_DIGITS = 300


@dataclass
class Log:
    """A parsed log: ``frame`` has columns ``step`` (int), ``loss`` (float) and, with a grad-norm
    column, ``grad_norm`` (float) and ``grad_norm_missing`` (bool: the cell was empty)."""

    path: str
    frame: pd.DataFrame
    step_column: str
    loss_column: str
    grad_column: str | None

    @property
    def has_grad_norm(self) -> bool:
        return self.grad_column is not None


def _find(columns: list[str], names: tuple[str, ...], *, wandb: bool = False) -> str | None:
    low = {c.lower().strip(): c for c in columns}
    for n in names:
        if n.lower() in low:
            return low[n.lower()]
    if wandb:
        for n in names:
            for c in columns:
                if c.lower().strip().endswith(" - " + n.lower()):
                    return c
    return None


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def parse_json(text: str) -> Any:
    """``json.loads`` that fails only with a ValueError carrying a short reason, also where
    json itself would raise RecursionError (deep nesting) or hit Python's int-string limit:
    a damaged line must be a one-line error or a skipped row, never a traceback."""
    try:
        return json.loads(text, parse_int=_parse_int)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except json.JSONDecodeError as e:
        raise ValueError(e.msg) from None


def json_lines(path: Path) -> Iterator[tuple[int, Any, bool]]:
    """(line number, value or a ValueError saying why there is none, whether the line ended)
    per non-blank line. Bytes that are not UTF-8 spoil their own line only, so a reader can
    name it."""
    with path.open(encoding="utf-8", errors="surrogateescape") as f:
        for i, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            try:
                text.encode("utf-8")
                value = parse_json(text)
            except UnicodeEncodeError:
                value = ValueError("not UTF-8 text")
            except ValueError as e:
                value = ValueError(f"not valid JSON ({e})")
            yield i, value, line.endswith("\n")


def _read_jsonl(path: Path) -> pd.DataFrame:
    rows = []
    for i, obj, _ in json_lines(path):
        if isinstance(obj, ValueError):
            raise UserError(f"{path}: line {i}: {obj}")
        if not isinstance(obj, dict):
            raise UserError(f"{path}: line {i}: expected a JSON object, got {type(obj).__name__}")
        rows.append(obj)
    # Built by hand: pandas would fill absent keys with NaN, indistinguishable from a logged
    # NaN loss; absent keys must read as missing (None).
    cols: dict[str, None] = {}
    for r in rows:
        cols.update(dict.fromkeys(r))
    import pandas as pd

    return pd.DataFrame({c: [r.get(c) for r in rows] for c in cols}, dtype=object)


def _read_csv(path: Path, sep: str) -> pd.DataFrame:
    """Cells as strings. Read by hand, not by pandas, which turns a row with extra fields into
    an index and fills a short one: a ragged row is refused with its line number."""
    header: list[str] | None = None
    rows: list[list[str]] = []
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter=sep, strict=True)
        try:
            for fields in reader:
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue  # a blank line
                if header is None:
                    header = fields
                elif len(fields) != len(header):
                    n = len(fields)
                    raise UserError(f"{path}: line {reader.line_num}: {n} field"
                                    f"{'' if n == 1 else 's'}, the header has {len(header)}")
                else:
                    rows.append(fields)
        except csv.Error as e:
            raise UserError(f"{path}: line {reader.line_num}: cannot read ({e})") from None
    if header is None:
        raise UserError(f"{path}: empty file")
    import pandas as pd

    return pd.DataFrame(rows, columns=_unique(header), dtype=object)


def _unique(names: list[str]) -> list[str]:
    """Header names made distinct as pandas does (``loss``, ``loss.1``), so a repeated name
    cannot silently merge two columns."""
    out: list[str] = []
    for n in names:
        name, k = n, 0
        while name in out:
            k += 1
            name = f"{n}.{k}"
        out.append(name)
    return out


def _is_jsonl(path: Path) -> bool:
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return True
    if path.suffix.lower() in (".csv", ".tsv", ".txt"):
        return False
    with path.open("rb") as f:
        head = f.read(4096).lstrip()
    return head.startswith(b"{")


def _numeric(df: pd.DataFrame, col: str, path: Path, *, required: bool) -> list[float | None]:
    """Column as floats, None for missing cells (kept apart from logged NaN/inf values)."""
    out = []
    for i, v in enumerate(df[col].tolist()):
        if v is None or (isinstance(v, str) and not v.strip()):
            out.append(None)
            continue
        if isinstance(v, bool):
            raise UserError(f"{path}: column {col!r}, row {i + 1}: non-numeric value {v!r}")
        try:
            x = float(v)
        except (TypeError, ValueError, OverflowError):
            raise UserError(
                f"{path}: column {col!r}, row {i + 1}: non-numeric value {v!r}"
            ) from None
        out.append(x)
    if required and all(x is None for x in out):
        raise UserError(f"{path}: column {col!r} has no values")
    return out


def read_log(
    path: str | Path, metric: str | None = None, grad_metric: str | None = None
) -> Log:
    """Read ``path`` into a :class:`Log`; every problem raises :class:`UserError` (one line)."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such file")
    if p.is_dir():
        raise UserError(f"{p}: is a directory, expected a CSV or JSONL log")
    try:
        if _is_jsonl(p):
            df = _read_jsonl(p)
        else:
            df = _read_csv(p, "\t" if p.suffix.lower() == ".tsv" else ",")
    except (OSError, UnicodeDecodeError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{p}: cannot read: {msg}") from None
    if df.empty or not len(df.columns):
        raise UserError(f"{p}: empty file (no rows)")

    cols = [str(c) for c in df.columns]
    df.columns = cols
    step_col = _find(cols, STEP_NAMES)
    if step_col is None:
        raise UserError(f"{p}: no step column (looked for {', '.join(STEP_NAMES)}; found {', '.join(cols)})")
    if metric:
        loss_col = _find(cols, (metric,), wandb=True)
        if loss_col is None:
            raise UserError(f"{p}: no column {metric!r} (found {', '.join(cols)})")
    else:
        loss_col = _find(cols, LOSS_NAMES, wandb=True) or _find(cols, ("value",))
        if loss_col is None:
            raise UserError(
                f"{p}: no loss column (looked for {', '.join(LOSS_NAMES)}, value; use --metric NAME; "
                f"found {', '.join(cols)})"
            )
    if grad_metric:
        grad_col = _find(cols, (grad_metric,), wandb=True)
        if grad_col is None:
            raise UserError(f"{p}: no column {grad_metric!r} (found {', '.join(cols)})")
    else:
        grad_col = _find(cols, GRAD_NAMES, wandb=True)

    loss = _numeric(df, loss_col, p, required=True)
    step = _numeric(df, step_col, p, required=True)
    keep = [i for i, x in enumerate(loss) if x is not None]
    for i in keep:
        s = step[i]
        if s is None or not math.isfinite(s) or s != int(s):
            what = "missing step" if s is None else f"step {s!r} is not an integer"
            raise UserError(f"{p}: column {step_col!r}, row {i + 1}: {what}")
        if not 0 <= s <= MAX_STEP:
            raise UserError(f"{p}: column {step_col!r}, row {i + 1}: step "
                            f"{df[step_col].iloc[i]!r} is out of range (allowed: 0 to 2**53 - 1)")
    import pandas as pd

    out = pd.DataFrame(
        {"step": [step[i] for i in keep], "loss": [loss[i] for i in keep]}, dtype=float
    )
    if grad_col is not None:
        g = _numeric(df, grad_col, p, required=False)
        out["grad_norm"] = [math.nan if g[i] is None else g[i] for i in keep]
        # Missing cells are not logged NaNs: a NaN grad norm is a divergence, a gap is not.
        out["grad_norm_missing"] = [g[i] is None for i in keep]
    if M.INJECTED in cols:
        # Our own metrics.jsonl marks injected-fault steps; keep them so offline severity
        # equals the trainer's (injected steps add no area).
        flags = _numeric(df, M.INJECTED, p, required=False)
        out["injected"] = [bool(flags[i]) for i in keep]
    out["step"] = out["step"].astype("int64")
    out = out.sort_values("step", kind="stable").drop_duplicates("step", keep="last")
    return Log(str(p), out.reset_index(drop=True), step_col, loss_col, grad_col)
