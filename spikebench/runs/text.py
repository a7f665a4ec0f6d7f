"""Plain logs, CSV/TSV or JSONL: every column as read (:func:`read_table`, for the run
readers of :mod:`spikebench.runs`), and one such log straight to the detector's table
(:func:`read_log`, ``spikebench spikes FILE``) by a faster lane that gives the same reading.

- JSONL (``.jsonl``/``.ndjson``/``.json``, or any file whose first non-blank character is
  ``{``): one flat JSON object per line; blank lines are skipped.
- CSV (anything else; ``.tsv`` is tab-separated).

Values that read as numbers (including ``nan``/``inf``) are kept; anything else is an
error naming the file, the column, the row and the value, as are steps past
0..2**53 - 1 (floats stop being exact) and a CSV row of the wrong width. Only regular
files are read (a FIFO would block, a device such as ``/dev/zero`` never ends), and a
line over ``MAX_LINE`` characters is refused where it starts, without being held in
memory. A plain CSV is parsed by :mod:`.csv_fast` (seconds for millions of rows), a JSONL
log's lines by json's C scanner in one pass; anything those cannot vouch for is read line
by line and cell by cell, with the same result or the error it words.
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
from pathlib import Path

from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.runs import columns
from spikebench.spikes.logs import (
    DECODER,
    MAX_LINE,
    MAX_STEP,
    Log,
    json_lines,
    make_frame,
)

JSONL_PIECE = 1 << 23  # bytes of a JSONL log parsed at a time
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
TEXT_SUFFIXES = (".csv", ".tsv", ".txt")


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


def is_dir(p: Path) -> bool:
    """Whether ``p`` is a folder; anything else that is not a regular file is refused by
    :func:`check_file` (a FIFO would block, a device never end)."""
    try:
        st = p.stat()
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise UserError(f"{p}: file name too long") from None
        check_file(p)  # its one-line refusal (no such file, cannot read)
        raise
    if stat.S_ISDIR(st.st_mode):
        return True
    check_file(p)
    return False


class LineTooLong(ValueError):
    """A line past ``MAX_LINE`` characters; ``number`` is its line number."""

    def __init__(self, number: int):
        super().__init__(f"line {number}: longer than {MAX_LINE:,} characters, not a log")
        self.number = number


def capped_lines(f) -> Iterator[str]:
    """The lines of text file ``f`` as iterating it gives them, but raising
    :class:`LineTooLong` at a line over ``MAX_LINE`` characters instead of reading it whole."""
    n = 0
    while line := f.readline(MAX_LINE + 1):
        n += 1
        if len(line) > MAX_LINE and line[-1] not in "\r\n":  # readline's cap, not an end
            raise LineTooLong(n)
        yield line


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
    from spikebench.runs.csv_fast import read_capped

    make = getattr(json.scanner, "c_make_scanner", None)
    data = read_capped(path, MAX_LINE)
    if make is None or data is None or b"\r" in data:  # \r: line ends as text mode reads
        return None
    scan, objs, start = make(DECODER), [], 0
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
            if "field limit" in str(e):  # an unclosed quote, or no log: say the limit
                raise UserError(f"{path}: line {reader.line_num}: a field longer than "
                                f"{csv.field_size_limit():,} characters (an unclosed quote?), "
                                "not a log") from None
            raise UserError(f"{path}: line {reader.line_num}: cannot read ({e})") from None
        except LineTooLong as e:
            raise UserError(f"{path}: {e}") from None
    if header is None:
        raise UserError(f"{path}: empty file")
    names = unique(header)
    return names, _Cells(rows, names=names)


def unique(names: list[str]) -> list[str]:
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


def is_jsonl(path: Path) -> bool:
    if path.suffix.lower() in JSONL_SUFFIXES:
        return True
    if path.suffix.lower() in TEXT_SUFFIXES:
        return False
    with path.open("rb") as f:
        head = f.read(4096).lstrip()
    return head.startswith(b"{")


def numeric(cells: list, col: str, path: Path, *, required: bool) -> list[float | None]:
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
    return _table(p)


def _sep(p: Path) -> str:
    return "\t" if p.suffix.lower() == ".tsv" else ","


def _table(p: Path) -> tuple[list[str], _Cells]:
    try:
        cols, cells = _read_jsonl(p) if is_jsonl(p) else _read_csv(p, _sep(p))
    except (OSError, UnicodeDecodeError) as e:
        raise _cannot_read(p, e) from None
    if not cells.rows or not cols:
        raise UserError(f"{p}: empty file (no rows)")
    return cols, cells


def read_log(path: str | Path, metric: str | None = None, grad_metric: str | None = None,
             step: str | None = None) -> Log:
    """One plain log as the detector's :class:`Log`: the reading of the run readers
    (:func:`spikebench.runs.plain.read_file`, then :func:`.table.to_log`), by a lane that
    builds no record per step where the log is plain: one row per step with its loss
    (no step repeated, no grad norm on a row without a loss) and at most one loss column.
    Anything else is read by the run reader, which merges rows by step and says how."""
    p = Path(path)
    check_file(p)
    if not is_jsonl(p):
        try:
            plain = _read_plain_csv(p, _sep(p), metric, grad_metric, step)
        except (OSError, UnicodeDecodeError) as e:
            raise _cannot_read(p, e) from None
        if plain is not None:
            return plain
    cols, cells = _table(p)
    log = _direct(p, cols, cells, metric, grad_metric, step)
    if log is not None:
        return log
    from spikebench.runs.detect import detect_file
    from spikebench.runs.plain import read_file
    from spikebench.runs.table import to_log

    return to_log(read_file(p, name=p.name, fmt=detect_file(p), step=step, metric=metric,
                            grad_metric=grad_metric, table=(cols, cells)))


def pick(p: Path, cols: list[str], metric: str | None, grad_metric: str | None,
         step: str | None) -> tuple[str, str, str | None, str] | None:
    """The step, loss and grad-norm columns as :func:`.table.build` picks them, and the
    note; None where several loss columns need their counts to choose (the run reader's)."""
    step_col, note = columns.pick_step(str(p), cols, step)
    rest = [c for c in cols if c != step_col]
    if metric is None and len(columns.find(rest, columns.LOSS_NAMES)) > 1:
        return None
    loss_col, _ = columns.pick_loss(str(p), rest, metric)
    grad_col = columns.pick_grad(str(p), [c for c in rest if c != loss_col], grad_metric)
    return step_col, loss_col, grad_col, note


def _direct(p: Path, cols: list[str], cells: _Cells, metric: str | None,
            grad_metric: str | None, step: str | None) -> Log | None:
    names = pick(p, cols, metric, grad_metric, step)
    if names is None:
        return None
    step_col, loss_col, grad_col, note = names
    loss = numeric(cells[loss_col], loss_col, p, required=True)
    steps = numeric(cells[step_col], step_col, p, required=True)
    keep = [i for i, x in enumerate(loss) if x is not None]
    for i in keep:
        s = steps[i]
        if s is None or not math.isfinite(s) or s != int(s):
            what = "missing step" if s is None else f"step {s!r} is not an integer"
            raise UserError(f"{p}: column {step_col!r}, row {i + 1}: {what}")
        if not 0 <= s <= MAX_STEP:
            raise UserError(f"{p}: column {step_col!r}, row {i + 1}: step "
                            f"{cells[step_col][i]!r} is out of range (allowed: 0 to 2**53 - 1)")
    if len({steps[i] for i in keep}) != len(keep):
        return None  # repeated steps: merged by the run reader, with a note
    grad = missing = injected = None
    if grad_col is not None:
        g = numeric(cells[grad_col], grad_col, p, required=False)
        if len(keep) != len(loss) and any(g[i] is not None and loss[i] is None
                                          for i in range(len(g))):
            return None  # a grad norm on its own row: merged into its step by the run reader
        grad = [math.nan if g[i] is None else g[i] for i in keep]
        # Missing cells are not logged NaNs: a NaN grad norm is a divergence, a gap is not.
        missing = [g[i] is None for i in keep]
    if M.INJECTED in cols:
        # Our own metrics.jsonl marks injected-fault steps; keep them so offline severity
        # equals the trainer's (injected steps add no area).
        flags = numeric(cells[M.INJECTED], M.INJECTED, p, required=False)
        if len(keep) != len(loss) and any(flags[i] and loss[i] is None
                                          for i in range(len(flags))):
            return None
        injected = [bool(flags[i]) for i in keep]
    frame = make_frame([steps[i] for i in keep], [loss[i] for i in keep], grad, missing,
                       injected)
    return Log(str(p), frame, step_col, loss_col, grad_col, note)


def _read_plain_csv(p: Path, sep: str, metric: str | None, grad_metric: str | None,
                    step: str | None = None) -> Log | None:
    """The log through :mod:`.csv_fast` if it is a plain CSV it can vouch for, else None."""
    from spikebench.runs.csv_fast import read_plain_csv

    notes: list[str] = []

    def choose(cols: list[str]) -> tuple[str, str, str | None] | None:
        names = pick(p, cols, metric, grad_metric, step)
        if names is None:
            return None
        notes.append(names[3])
        return names[:3]

    c = read_plain_csv(p, sep, choose, unique,
                       max_line=MAX_LINE, max_step=MAX_STEP, injected_name=M.INJECTED)
    if c is None:
        return None
    return Log(str(p), make_frame(c.step, c.loss, c.grad, c.grad_missing, c.injected),
               *c.names, notes[-1])
