"""Reading training logs (CSV or JSONL) into a tidy step/loss/grad_norm table.

Accepted inputs:

- JSONL (``.jsonl``/``.ndjson``/``.json``, or any file whose first non-blank character is
  ``{``): one flat JSON object per line, e.g. our own ``metrics.jsonl``. Blank lines are
  skipped; rows without the loss (eval-only lines) are skipped.
- CSV (anything else; ``.tsv`` is tab-separated): W&B and TensorBoard exports and other
  frameworks' logs.

Columns are matched case-insensitively, by the rules of :mod:`spikebench.runs.columns`:
step ``--step`` if given, else the one of ``step``, ``global_step``, ``train/global_step``
present (W&B's ``_step`` only where none is); loss ``--metric`` if given, else the one of
``loss``, ``train/loss``, ``train_loss``, ``train_loss_step`` present, then a W&B export
column ``<run> - train/loss`` of one run (not its ``__MIN``/``__MAX`` companions), then a
TensorBoard-style ``value``. Two candidates are refused, naming both, never one guessed.
Grad norm (optional): ``grad_norm``, ``optim/grad_norm``, ``train/grad_norm``. Other
formats (TensorBoard, HF, MLflow, long CSV, W&B charts) are :mod:`spikebench.runs`'.
Values that read as numbers (including ``nan``/``inf``) are kept;
anything else is an error naming the file, the column, the row and the value, as are steps
past 0..2**53 - 1 (floats stop being exact) and a CSV row of the wrong width. Rows are
sorted by step; for repeated steps (a resumed run) the last row wins.

Only regular files are read (a FIFO would block, a device such as ``/dev/zero`` never
ends), and a line over ``MAX_LINE`` characters is refused where it starts, without being
held in memory. A plain CSV is parsed by :mod:`.csv_fast` (seconds for millions of rows),
a JSONL log's lines by json's C scanner in one pass; anything those cannot vouch for is
read here line by line and cell by cell, with the same result or the error it words.
"""

from __future__ import annotations

import csv
import errno
import itertools
import json
import json.scanner
import math
import operator
import stat
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
# Longest line read (characters, without its newline): far past any log's, short enough
# that an endless line is refused before it fills memory.
MAX_LINE = 1 << 20
JSONL_PIECE = 1 << 23  # bytes of a JSONL log parsed at a time


@dataclass
class Log:
    """A parsed log: ``frame`` has columns ``step`` (int), ``loss`` (float) and, with a grad-norm
    column, ``grad_norm`` (float) and ``grad_norm_missing`` (bool: the cell was empty)."""

    path: str
    frame: pd.DataFrame
    step_column: str
    loss_column: str
    grad_column: str | None
    note: str = ""  # how a choice between candidate columns was made, where one was

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


# json.loads(text, parse_int=_parse_int) builds this decoder anew for every line.
_DECODER = json.JSONDecoder(parse_int=_parse_int)


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


def check_file(path: Path) -> None:
    """Refuse (one line) what is not a readable regular file, before opening it: opening a
    FIFO blocks until a writer comes, and a device such as /dev/zero never ends."""
    try:
        st = path.stat()
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            raise UserError(f"{path}: no such file") from None
        raise UserError(f"{path}: cannot read: {e.strerror or type(e).__name__}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a directory, expected a CSV or JSONL log")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device"
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket"
                if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise UserError(f"{path}: is {kind}, expected a CSV or JSONL log file")


class LineTooLong(ValueError):
    """A line past ``MAX_LINE`` characters; ``number`` is its line number."""

    def __init__(self, number: int):
        super().__init__(f"line {number}: longer than {MAX_LINE:,} characters, not a log")
        self.number = number


def _too_long(line: str) -> bool:
    # Read with readline(MAX_LINE + 1): a full read that did not end the line is too long.
    return len(line) > MAX_LINE and line[-1] not in "\r\n"


def capped_lines(f) -> Iterator[str]:
    """The lines of text file ``f`` as iterating it gives them, but raising
    :class:`LineTooLong` at a line over ``MAX_LINE`` characters instead of reading it whole."""
    n = 0
    while line := f.readline(MAX_LINE + 1):
        n += 1
        if _too_long(line):
            raise LineTooLong(n)
        yield line


def json_lines(path: Path) -> Iterator[tuple[int, Any, bool]]:
    """(line number, value or a ValueError saying why there is none, whether the line ended)
    per non-blank line. Bytes that are not UTF-8 spoil their own line only, so a reader can
    name it; so does a line over ``MAX_LINE`` characters, which is skipped unread."""
    with path.open(encoding="utf-8", errors="surrogateescape") as f:
        i = 0
        while line := f.readline(MAX_LINE + 1):
            i += 1
            if _too_long(line):
                while (rest := f.readline(MAX_LINE)) and not rest.endswith("\n"):
                    pass  # the rest of the long line, a piece at a time
                yield i, ValueError(f"longer than {MAX_LINE:,} characters"), rest != ""
                continue
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


def _read_jsonl(path: Path) -> tuple[list[str], _Cells]:
    rows = _jsonl_objects(path)
    if rows is None:  # some line is not an object: find it and say why
        rows = []
        for i, obj, _ in json_lines(path):
            if isinstance(obj, ValueError):
                raise UserError(f"{path}: line {i}: {obj}")
            if not isinstance(obj, dict):
                raise UserError(
                    f"{path}: line {i}: expected a JSON object, got {type(obj).__name__}")
            rows.append(obj)
    # Cells by hand: pandas would fill absent keys with NaN, indistinguishable from a logged
    # NaN loss; absent keys must read as missing (None).
    return list(dict.fromkeys(itertools.chain.from_iterable(rows))), _Cells(rows, get=True)


def _jsonl_objects(path: Path) -> list[dict] | None:
    """Every non-blank line's JSON object, parsed by json's C scanner with ``map`` (the
    per-line Python of json_lines costs more than the parse); None unless every line is an
    object: the careful loop then reports the first that is not. The scanner is the one
    ``json.loads`` uses, with the same ``parse_int``, so the values are the same."""
    from spikebench.spikes.csv_fast import read_capped

    make = getattr(json.scanner, "c_make_scanner", None)
    data = read_capped(path, MAX_LINE)
    if make is None or data is None or b"\r" in data:  # \r: line ends as text mode reads
        return None
    scan, objs, start = make(_DECODER), [], 0
    while start < len(data):  # in pieces, so the text and its lines are never all held
        end = data.find(b"\n", start + JSONL_PIECE) + 1 or len(data)
        try:  # a piece ends at a newline, never inside a character
            lines = [t for t in map(str.strip, data[start:end].decode("utf-8").split("\n"))
                     if t]
            found = list(map(scan, lines, itertools.repeat(0)))
        except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError too
            return None
        # A line with no value stops map with StopIteration: fewer results than lines.
        if len(found) != len(lines):
            return None
        got, ends = zip(*found, strict=True) if found else ((), ())
        if list(ends) != list(map(len, lines)) or not set(map(type, got)) <= {dict}:
            return None
        objs += got
        start = end
    return objs


class _Cells(dict):
    """A table's columns (name -> cells, in row order), each built on first use: a JSONL
    log has many keys, a wide CSV many columns, and only three are read."""

    def __init__(self, rows: list, *, get: bool = False, names: list[str] | None = None):
        super().__init__()
        self.rows, self.get_, self.names = rows, get, names

    def __missing__(self, col: str) -> list:
        pick = (operator.methodcaller("get", col) if self.get_
                else operator.itemgetter(self.names.index(col)))  # type: ignore[union-attr]
        cells = self[col] = list(map(pick, self.rows))
        return cells


def _read_csv(path: Path, sep: str) -> tuple[list[str], _Cells]:
    """Cells as strings. Read by hand, not by pandas, which turns a row with extra fields into
    an index and fills a short one: a ragged row is refused with its line number."""
    header: list[str] | None = None
    rows: list[list[str]] = []
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(capped_lines(f), delimiter=sep, strict=True)
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
        except LineTooLong as e:
            raise UserError(f"{path}: {e}") from None
    if header is None:
        raise UserError(f"{path}: empty file")
    names = _unique(header)
    return names, _Cells(rows, names=names)


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


def _numeric(cells: list, col: str, path: Path, *, required: bool) -> list[float | None]:
    """Column as floats, None for missing cells (kept apart from logged NaN/inf values)."""
    if set(map(type, cells)) <= {float, int}:  # JSON numbers: float() of each, in C
        try:
            return list(map(float, cells))
        except OverflowError:
            pass  # an integer past the float range: named below
    out = []
    for i, v in enumerate(cells):
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


def _cannot_read(p: Path, e: Exception) -> UserError:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return UserError(f"{p}: cannot read: {msg}")


def read_table(path: str | Path) -> tuple[list[str], _Cells]:
    """Every column of a CSV/TSV or JSONL file, cells as read (strings; JSON values, None
    where a line lacks the key), by the careful readers: for the formats of
    :mod:`spikebench.runs` that need more columns than a log's three."""
    p = Path(path)
    check_file(p)
    try:
        if _is_jsonl(p):
            cols, cells = _read_jsonl(p)
        else:
            cols, cells = _read_csv(p, "\t" if p.suffix.lower() == ".tsv" else ",")
    except (OSError, UnicodeDecodeError) as e:
        raise _cannot_read(p, e) from None
    if not cells.rows or not cols:
        raise UserError(f"{p}: empty file (no rows)")
    return cols, cells


def read_log(
    path: str | Path, metric: str | None = None, grad_metric: str | None = None,
    step: str | None = None,
) -> Log:
    """Read ``path`` into a :class:`Log`; every problem raises :class:`UserError` (one line)."""
    p = Path(path)
    check_file(p)
    try:
        if _is_jsonl(p):
            cols, cells = _read_jsonl(p)
        else:
            sep = "\t" if p.suffix.lower() == ".tsv" else ","
            plain = _read_plain_csv(p, sep, metric, grad_metric, step)
            if plain is not None:
                return plain
            cols, cells = _read_csv(p, sep)
    except (OSError, UnicodeDecodeError) as e:
        raise _cannot_read(p, e) from None
    if not cells.rows or not cols:
        raise UserError(f"{p}: empty file (no rows)")

    step_col, loss_col, grad_col, note = _columns(p, cols, metric, grad_metric, step)
    loss = _numeric(cells[loss_col], loss_col, p, required=True)
    step = _numeric(cells[step_col], step_col, p, required=True)
    keep = [i for i, x in enumerate(loss) if x is not None]
    for i in keep:
        s = step[i]
        if s is None or not math.isfinite(s) or s != int(s):
            what = "missing step" if s is None else f"step {s!r} is not an integer"
            raise UserError(f"{p}: column {step_col!r}, row {i + 1}: {what}")
        if not 0 <= s <= MAX_STEP:
            raise UserError(f"{p}: column {step_col!r}, row {i + 1}: step "
                            f"{cells[step_col][i]!r} is out of range (allowed: 0 to 2**53 - 1)")
    grad = missing = injected = None
    if grad_col is not None:
        g = _numeric(cells[grad_col], grad_col, p, required=False)
        grad = [math.nan if g[i] is None else g[i] for i in keep]
        # Missing cells are not logged NaNs: a NaN grad norm is a divergence, a gap is not.
        missing = [g[i] is None for i in keep]
    if M.INJECTED in cols:
        # Our own metrics.jsonl marks injected-fault steps; keep them so offline severity
        # equals the trainer's (injected steps add no area).
        flags = _numeric(cells[M.INJECTED], M.INJECTED, p, required=False)
        injected = [bool(flags[i]) for i in keep]
    frame = _frame([step[i] for i in keep], [loss[i] for i in keep], grad, missing, injected)
    return Log(str(p), frame, step_col, loss_col, grad_col, note)


def _columns(p: Path, cols: list[str], metric: str | None, grad_metric: str | None,
             step: str | None = None) -> tuple[str, str, str | None, str]:
    """The step, loss and grad-norm columns among ``cols`` (see the module docstring), and
    a note where a choice between candidates was made."""
    from spikebench.runs.columns import pick_grad, pick_loss, pick_step

    step_col, note = pick_step(str(p), cols, step)
    loss_col, _ = pick_loss(str(p), cols, metric)
    return step_col, loss_col, pick_grad(str(p), cols, grad_metric), note


def _read_plain_csv(p: Path, sep: str, metric: str | None, grad_metric: str | None,
                    step: str | None = None) -> Log | None:
    """The log through :mod:`.csv_fast` if it is a plain CSV, else None."""
    from spikebench.spikes.csv_fast import read_plain_csv

    notes: list[str] = []

    def pick(cols: list[str]) -> tuple[str, str, str | None]:
        *names, note = _columns(p, cols, metric, grad_metric, step)
        notes.append(note)
        return tuple(names)  # type: ignore[return-value]

    c = read_plain_csv(p, sep, pick, _unique,
                       max_line=MAX_LINE, max_step=MAX_STEP, injected_name=M.INJECTED)
    if c is None:
        return None
    return Log(str(p), _frame(c.step, c.loss, c.grad, c.grad_missing, c.injected), *c.names,
               notes[-1])


def _frame(step, loss, grad, grad_missing, injected) -> pd.DataFrame:
    """The tidy table of the rows with a loss: sorted by step, the last of repeated steps."""
    import numpy as np
    import pandas as pd

    out = pd.DataFrame({"step": np.asarray(step, dtype=float),
                        "loss": np.asarray(loss, dtype=float)})
    if grad is not None:
        out["grad_norm"] = np.asarray(grad, dtype=float)
        out["grad_norm_missing"] = np.asarray(grad_missing, dtype=bool)
    if injected is not None:
        out["injected"] = np.asarray(injected, dtype=bool)
    out["step"] = out["step"].astype("int64")
    out = out.sort_values("step", kind="stable").drop_duplicates("step", keep="last")
    return out.reset_index(drop=True)
