"""What every reader of a log shares below the log layer: :class:`Log`, the table the
detector scores (:mod:`spikebench.spikes.offline`), and the JSON-line primitives spikebench's
own files are read with (the run folder's ``metrics.jsonl``, the study's records, the
report). Reading other tools' logs, finding their columns and runs, is
:mod:`spikebench.runs`'.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported where a log is read: the train loop needs none
    import pandas as pd

MAX_STEP = 2**53 - 1  # the largest step a float (pandas, plots) still holds exactly
# Longer integers are past a float's range (and near Python's 4,300-digit parsing limit):
# damage, not a value.
MAX_INT_DIGITS = 300
# Longest line read (characters, without its newline): far past any log's, short enough
# that an endless line is refused before it fills memory.
MAX_LINE = 1 << 20


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


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits")
    return int(text)


# json.loads(text, parse_int=_parse_int) builds this decoder anew for every line.
DECODER = json.JSONDecoder(parse_int=_parse_int)


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


def too_long(line: str) -> bool:
    # Read with readline(MAX_LINE + 1): a full read that did not end the line is too long.
    return len(line) > MAX_LINE and line[-1] not in "\r\n"


def json_lines(path: Path) -> Iterator[tuple[int, Any, bool]]:
    """(line number, value or a ValueError saying why there is none, whether the line ended)
    per non-blank line. Bytes that are not UTF-8 spoil their own line only, so a reader can
    name it; so does a line over ``MAX_LINE`` characters, which is skipped unread."""
    with path.open(encoding="utf-8", errors="surrogateescape") as f:
        i = 0
        while line := f.readline(MAX_LINE + 1):
            i += 1
            if too_long(line):
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


def make_frame(step, loss, grad, grad_missing, injected) -> pd.DataFrame:
    """The tidy table of the rows with a loss: sorted by step, the last of repeated steps."""
    import numpy as np
    import pandas as pd

    cols = {"step": np.asarray(step, dtype=float).astype("int64"),
            "loss": np.asarray(loss, dtype=float)}
    if grad is not None:
        cols["grad_norm"] = np.asarray(grad, dtype=float)
        cols["grad_norm_missing"] = np.asarray(grad_missing, dtype=bool)
    if injected is not None:
        cols["injected"] = np.asarray(injected, dtype=bool)
    out = pd.DataFrame(cols, copy=False)  # one call: no column added to a frame one by one
    s = out["step"].to_numpy()
    if (s[1:] > s[:-1]).all():  # in order, no step twice (a plain log): nothing to do
        return out
    out = out.sort_values("step", kind="stable").drop_duplicates("step", keep="last")
    return out.reset_index(drop=True)
