"""A run's log followed as it grows: the one tailer (a command trial's live view and its
pruning reports, the sweep's live metrics, a bench's reading of a trainer's log).

:class:`Lines` gives the complete lines a file gained since the last call. :class:`Tail`
gives the records (keyed by :mod:`spikebench.metrics` names) a log gained, read with the
columns a whole read takes (:func:`.columns.choose`), so a log followed to its end reads
as :func:`spikebench.runs.read_runs` reads it:

- a plain CSV/TSV or JSONL log is read line by line as it grows; rows of one step merge
  (a later value wins), and a step is given once a later step has begun (a JSONL log may
  add that step's validation loss on a later line); ``final`` gives the last;
- any other log (a TensorBoard folder, a trainer_state.json, an MLflow run) is read whole
  again when it has changed, at most every :data:`REREAD_S` seconds, and the steps past
  the last given are given.

While a log grows, what cannot be read yet (a half-written line, a header still to come,
columns not yet sure) gives nothing; the whole read at the end says what is wrong. A step
that goes back (a script resumed from its checkpoint), or columns that change as keys
appear, end the tail (``ended`` says why): the whole log is read again at the end.
"""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path
from typing import Any

from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.runs.columns import Choice, choose
from spikebench.runs.text import JSONL_SUFFIXES, TEXT_SUFFIXES, numeric, unique
from spikebench.spikes.logs import parse_json

REREAD_S = 1.0  # how often a log of another format may be read whole again


class Lines:
    """The complete lines ``path`` gained since the last call (``final``: also a last line
    without its newline). ``before``: the name the file has while it is written (the run
    API's ``metrics.jsonl.partial``, renamed to ``path`` with the same bytes when the run
    ends). A file cut back (a resumed run rewrites its log) is read again from its start,
    and ``restarted`` says so."""

    def __init__(self, path: Path, *, before: Path | None = None):
        self.path, self.before = Path(path), before
        self.offset = 0
        self.rest = b""
        self.restarted = False

    def where(self) -> Path:
        return self.before if self.before is not None and self.before.exists() else self.path

    def read(self, final: bool = False) -> list[bytes]:
        try:
            with self.where().open("rb") as f:
                if f.seek(0, os.SEEK_END) < self.offset:
                    self.offset, self.rest, self.restarted = 0, b"", True
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self.rest + data
        cut = data.rfind(b"\n") + 1
        lines, self.rest = data[:cut].splitlines(), data[cut:]
        if final and self.rest.strip():
            lines.append(self.rest)
            self.rest = b""
        return lines


def is_text_log(path: Path) -> bool:
    """Whether ``path`` is (or, not there yet, will be) a log :class:`Tail` reads by line."""
    from spikebench.runs.detect import FLAT, detect_file

    if path.is_dir():
        return False
    if not path.exists():
        return path.suffix.lower() in JSONL_SUFFIXES + TEXT_SUFFIXES or path.suffix == ""
    return detect_file(path) in FLAT


class Tail:
    """The records a run's log gained since the last :meth:`poll` (module docstring).
    ``step``/``metric``/``grad_metric``/``extra``: as for :func:`spikebench.runs.read_runs`."""

    def __init__(self, path: Path, *, before: Path | None = None, **opts: Any):
        self.path, self.opts = Path(path), opts
        self.lines = Lines(self.path, before=before)
        self.text: bool | None = None  # by line, or read whole again (decided once it exists)
        self.jsonl: bool | None = None
        self.header: list[str] | None = None
        self.keys: dict[str, int] = {}  # column -> values seen (a loss series beats one value)
        self.choice: Choice | None = None
        self.held: dict[str, Any] | None = None  # the last step, which may still gain values
        self.last = -1  # the last step given
        self.ended = ""
        self.seen: tuple = ()  # what the whole log looked like when last read
        self.read_at = 0.0

    def poll(self, final: bool = False) -> list[dict[str, Any]]:
        """The records completed since the last call, in step order."""
        if self.ended:
            return []
        if self.text is None:
            if not (self.lines.where().exists() or final):
                return []
            self.text = is_text_log(self.lines.where())
        by_step = self._by_line(final) if self.text else self._whole(final)
        if self.lines.restarted and not self.ended:
            self.ended = f"{self.path.name} was cut back (a resumed run rewrote it)"
        return self._give(by_step, final)

    def _give(self, by_step: dict[int, dict[str, Any]], final: bool) -> list[dict[str, Any]]:
        out = []
        for s in sorted(by_step):
            if self.held is not None and s == self.held[M.STEP]:
                self.held = {**self.held, **by_step[s]}
                continue
            top = self.held[M.STEP] if self.held is not None else self.last
            if s <= top:
                self.ended = f"its steps went back from {top} to {s} (a restart)"
                break
            if self.held is not None:
                out.append(self.held)
            self.held = by_step[s]
        if final and self.held is not None and not self.ended:
            out.append(self.held)
            self.held = None
        if out:
            self.last = out[-1][M.STEP]
        return out

    # -------------------------------------------------------------- a plain log by line

    def _rows(self, final: bool) -> list[dict[str, Any]]:
        rows = []
        for raw in self.lines.read(final):
            text = raw.decode("utf-8", "replace").strip()
            if not text:
                continue
            if self.jsonl is None:
                self.jsonl = self.path.suffix.lower() in JSONL_SUFFIXES or (
                    self.path.suffix.lower() not in TEXT_SUFFIXES and text.startswith("{"))
            if self.jsonl:
                try:
                    row = parse_json(text)
                except ValueError:
                    continue  # a damaged line: the whole read names it
                if isinstance(row, dict):
                    rows.append(row)
                continue
            sep = "\t" if self.path.suffix.lower() == ".tsv" else ","
            try:
                cells = next(csv.reader([text.removeprefix("\ufeff")], delimiter=sep))
            except (csv.Error, StopIteration):
                continue
            if self.header is None:
                self.header = unique(cells)
            elif len(cells) == len(self.header):
                rows.append(dict(zip(self.header, cells, strict=True)))
        return rows

    def _by_line(self, final: bool) -> dict[int, dict[str, Any]]:
        rows = self._rows(final)
        for r in rows:
            for k, v in r.items():
                self.keys[k] = self.keys.get(k, 0) + (v is not None and v != "")
        if not self.keys:
            return {}
        try:
            choice = choose(str(self.path), list(self.keys), count=self.keys.__getitem__,
                            **self.opts)
        except UserError:
            return {}  # no loss column yet, or not sure which: the whole read decides
        old = self.choice
        if old is not None and (choice.step != old.step or any(
                choice.series.get(k) != c for k, c in old.series.items())):
            self.ended = "its columns changed as keys appeared"  # a series may only join
            return {}
        self.choice = choice
        by_step: dict[int, dict[str, Any]] = {}
        for r in rows:
            try:
                step = numeric([r.get(choice.step)], choice.step, self.path, required=True)[0]
                values = {k: numeric([r.get(c)], c, self.path, required=False)[0]
                          for k, c in choice.series.items()}
            except UserError:
                continue  # a value that is no number: the whole read names it
            if step is None or step != int(step) or step < 0:
                continue
            row = {k: v for k, v in values.items() if v is not None}
            if row:
                by_step.setdefault(int(step), {M.STEP: int(step)}).update(row)
        return by_step

    # ------------------------------------------------------------- another format, whole

    def _signature(self) -> tuple:
        p = self.lines.where()
        try:
            files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
            return tuple((str(q), q.stat().st_size, q.stat().st_mtime_ns) for q in files[:10_000])
        except OSError:
            return ()

    def _whole(self, final: bool) -> dict[int, dict[str, Any]]:
        from spikebench.runs import read_runs

        if not final and time.monotonic() < self.read_at:
            return {}
        start = time.monotonic()
        self.read_at = start + REREAD_S
        seen = self._signature()
        if not seen or (seen == self.seen and not final):
            return {}
        self.seen = seen
        try:
            runs = read_runs(self.lines.where(), **self.opts)
        except UserError:
            return {}
        finally:  # a log slow to read is read less often: at most a fifth of the time
            self.read_at = max(self.read_at, time.monotonic() + 4 * (time.monotonic() - start))
        if len(runs) != 1:
            return {}
        start = self.held[M.STEP] if self.held is not None else self.last + 1
        return {r[M.STEP]: dict(r) for r in runs[0].records if r[M.STEP] >= start}
