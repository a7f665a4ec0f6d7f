"""A plain CSV log parsed in C: the same columns the careful reader in :mod:`.text` gives,
for logs of millions of rows (its csv module and cell-by-cell Python take microseconds a
row: most of a minute for ten million).

Only a file this module can vouch for is parsed here; for anything else it answers None
and the careful reader, which also words every error, reads the file:

- the header is one line (parsed by :mod:`csv`, quotes allowed), with two or more names;
- every data row has exactly the header's number of fields (checked on the raw bytes, so a
  short or long row cannot be padded or shifted as pandas would), no blank lines, no
  quote characters, NUL bytes or lone carriage returns, valid UTF-8, no line over
  ``MAX_LINE`` and no field over :func:`csv.field_size_limit`;
- every cell of the columns used parses as a number, which pandas' parser (``fast_float``,
  correctly rounded) then reads as exactly the float ``float(cell)`` gives; cells it does
  not accept (``1_000``, `` nan``, non-ASCII digits) send the file to the careful reader;
- an empty cell is missing (known from the raw field bounds, so it is never confused with
  a logged ``nan``), and steps are whole numbers from 0 to 2**53 - 1 on every row with a
  loss.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BOM = b"\xef\xbb\xbf"
CHUNK = 1 << 23  # bytes read at a time
SCAN = 1 << 22  # bytes scanned for delimiters at a time
# Every spelling float() reads as NaN without surrounding spaces (pandas reads none of them).
NAN_TEXTS = [s + "".join(c) for s in ("", "+", "-") for c in itertools.product("nN", "aA", "nN")]


@dataclass
class Columns:
    """The used columns of the rows that have a loss, and the names they came from."""

    names: tuple[str, str, str | None]  # step, loss, grad norm
    step: np.ndarray  # float64, whole numbers
    loss: np.ndarray
    grad: np.ndarray | None  # NaN where missing
    grad_missing: np.ndarray | None
    injected: np.ndarray | None  # bool


def read_plain_csv(
    path: Path,
    sep: str,
    pick: Callable[[list[str]], tuple[str, str, str | None] | None],
    unique: Callable[[list[str]], list[str]],
    *,
    max_line: int,
    max_step: int,
    injected_name: str,
) -> Columns | None:
    """The columns of ``path`` if it is a plain CSV (see the module docstring), else None.
    ``pick`` names the step, loss and grad-norm columns among the header's (made distinct
    by ``unique``) and raises the reader's error if it cannot, or answers None: not for
    this lane. So does a log the run reader merges by step (:func:`.table.build`): a step
    repeated, a grad norm or injection flag on a row without a loss."""
    data = read_capped(path, max_line)
    if data is None:
        return None
    data = data.removeprefix(BOM)
    if b"\0" in data:
        return None
    if b"\r" in data:
        if data.count(b"\r") != data.count(b"\r\n"):
            return None
        data = data.replace(b"\r\n", b"\n")
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    end = data.find(b"\n")
    if end <= 0 or end > max_line:
        return None
    try:
        header = next(csv.reader([data[:end].decode("utf-8")], delimiter=sep, strict=True))
    except (csv.Error, StopIteration):
        return None
    body = data[end + 1:]
    if len(header) < 2 or not body or b'"' in body:
        return None
    if not body.endswith(b"\n"):
        body += b"\n"
    cols = unique(header)
    cells = _cells(body, sep, len(cols), max_line)
    if cells is None:
        return None
    names = pick(cols)  # after the rows are known sound: a ragged row is reported first
    if names is None:
        return None
    used = [names[0], names[1]] + [c for c in (names[2], injected_name) if c in cols]
    idx = sorted({cols.index(c) for c in used})
    values = _parse(body, sep, len(cols), idx, len(cells))
    if values is None:
        return None
    empty = {c: cells[:, cols.index(c)] for c in used}
    col = {c: values[cols.index(c)] for c in used}

    keep = ~empty[names[1]]
    if not keep.any() or any((~empty[c] & ~keep).any() for c in used[2:]):
        return None
    step = col[names[0]][keep]
    if empty[names[0]][keep].any() or not (
            np.isfinite(step) & (np.floor(step) == step) & (step >= 0)
            & (step < float(max_step) + 1)).all() or not _distinct(step):
        return None
    grad = missing = injected = None
    if names[2] is not None:
        missing = empty[names[2]][keep]
        grad = np.where(missing, np.nan, col[names[2]][keep])
    if injected_name in cols:
        injected = ~empty[injected_name][keep] & (col[injected_name][keep] != 0)
    return Columns(names, step, col[names[1]][keep], grad, missing, injected)


def _distinct(step: np.ndarray) -> bool:
    return bool((np.diff(step) > 0).all()) or len(np.unique(step)) == len(step)


def read_capped(path: Path, max_line: int) -> bytes | None:
    """The file's bytes; None as soon as a run of ``max_line`` bytes holds no newline."""
    chunks, run = [], 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
            if first < 0:
                run += len(chunk)
            else:
                if run + first > max_line:
                    return None
                run = len(chunk) - last - 1
            if run > max_line:
                return None
            chunks.append(chunk)
    return b"".join(chunks)


def _cells(body: bytes, sep: str, ncols: int, max_line: int) -> np.ndarray | None:
    """Which cells are empty, (rows, columns), if every line has ``ncols`` fields, none is
    longer than :func:`csv.field_size_limit` and no line than ``max_line``."""
    buf = np.frombuffer(body, np.uint8)
    limit, empty = csv.field_size_limit(), []
    seen, last, last_nl = 0, -1, -1  # delimiters before a piece; the last one's place
    # In pieces that stay in cache, each keeping only its cells' emptiness (a byte a cell):
    # several times faster than one pass over the whole file, and no array of positions.
    for o in range(0, len(buf), SCAN):
        b = buf[o:o + SCAN]
        pos = np.flatnonzero((b == ord(sep)) | (b == 10))
        if not len(pos):
            continue
        nl = b[pos] == 10
        pos += o
        # Delimiter number seen + i must end a line exactly when it is the ncols-th of it.
        first = (ncols - 1 - seen) % ncols
        if not nl[first::ncols].all() or int(nl.sum()) != len(nl[first::ncols]):
            return None
        lengths = np.diff(pos, prepend=last) - 1
        ends = pos[nl]
        if lengths.max() > limit or (len(ends) and np.diff(ends, prepend=last_nl).max()
                                     > max_line + 1):
            return None
        empty.append(lengths == 0)
        seen, last = seen + len(pos), int(pos[-1])
        if len(ends):
            last_nl = int(ends[-1])
    if seen % ncols or not empty:
        return None
    return np.concatenate(empty).reshape(-1, ncols)


def _parse(body: bytes, sep: str, ncols: int, idx: list[int], nrows: int
           ) -> dict[int, np.ndarray] | None:
    """Columns ``idx`` as float64 by pandas' C parser, or None where a cell is not a number
    it reads."""
    import pandas as pd

    try:
        df = pd.read_csv(
            io.BytesIO(body), sep=sep, header=None, names=list(range(ncols)), usecols=idx,
            dtype=dict.fromkeys(idx, "float64"), keep_default_na=False,
            na_values=["", *NAN_TEXTS], quoting=csv.QUOTE_NONE, engine="c",
            encoding="utf-8",
        )
    except (ValueError, pd.errors.ParserError, OverflowError):
        return None
    if len(df) != nrows:
        return None
    return {i: df[i].to_numpy(dtype=np.float64) for i in idx}
