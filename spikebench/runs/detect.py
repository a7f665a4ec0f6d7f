"""Which format a file or a folder is in, from its content and layout (never its name alone,
except TensorBoard's ``tfevents`` and HF's ``trainer_state.json``, names their libraries
fix).

Files, first rule that fits:

- ``tensorboard``: ``*tfevents*`` in the name, or a TFRecord whose first event is
  TensorBoard's file-version record (``brain.Event:``);
- ``hf-trainer-state``: named ``trainer_state.json``, or JSON whose object has
  ``log_history``;
- ``json-document``: a ``.json`` file that is one JSON document over several lines, not
  JSON Lines (refused by the reader unless it is a trainer state);
- a JSONL file (``.jsonl``/``.ndjson``/``.json``, or text starting with ``{``):
  ``wandb-history`` if its rows have ``_step``, else ``jsonl``;
- a CSV/TSV file, by its header: ``long-csv`` with ``tag`` and ``value`` columns (tbparse
  and other exporters: one row per step and tag); ``wandb-chart`` when every column but
  the x axis reads ``<run> - <metric>`` (a W&B panel's CSV export); ``wandb-history``
  with ``_step``; ``lightning-csv`` with ``hparams.yaml`` beside it, or named
  ``metrics.csv`` with ``epoch`` and ``step`` columns (Lightning's CSVLogger); else ``csv``.

Folders (see :mod:`.discover` for the walk): ``hf-trainer-state`` (a
``trainer_state.json`` in it or in a ``checkpoint-*`` folder in it), ``mlflow`` (a run:
``meta.yaml`` and ``metrics/``), ``spikebench`` (``metrics.jsonl`` with ``config.json``
or ``meta.json``), ``lightning-csv`` (``metrics.csv`` with ``hparams.yaml``),
``tensorboard`` (event files in it).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from spikebench.runs import columns
from spikebench.study import layout as L

HEAD = 1 << 16  # bytes read to decide
# Formats read by spikebench.runs.text.read_log, the fast lane of big plain logs.
FLAT = ("csv", "jsonl", "wandb-history", "lightning-csv")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
TEXT_SUFFIXES = (".csv", ".tsv", ".txt")


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(HEAD)
    except OSError:
        return b""  # the reader says why


def is_tfrecord(head: bytes) -> bool:
    # A TFRecord: 8-byte length, 4-byte CRC, then the first Event, whose file_version
    # field TensorBoard writers fill with "brain.Event:<n>".
    return len(head) > 16 and b"brain.Event:" in head[12:64]


def _lines(head: bytes) -> list[str]:
    text = head.decode("utf-8-sig", errors="replace")
    return [ln for ln in text.splitlines() if ln.strip()]


def header(path: Path, head: bytes | None = None) -> list[str]:
    """The first non-blank line of a CSV/TSV file as column names ([] if none reads)."""
    lines = _lines(_head(path) if head is None else head)
    if not lines:
        return []
    sep = "\t" if path.suffix.lower() == ".tsv" else ","
    try:
        return next(csv.reader(io.StringIO(lines[0]), delimiter=sep), [])
    except csv.Error:
        return []


def jsonl_keys(head: bytes) -> set[str] | None:
    """Keys of the JSON objects on the first lines; None if line 1 is not one (then the
    file is a JSON document, or damaged)."""
    keys: set[str] = set()
    for i, line in enumerate(_lines(head)[:50]):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            if i == 0:
                return None
            break  # a line cut by HEAD, or damage the reader will name
        if not isinstance(obj, dict):
            return None if i == 0 else keys
        keys.update(map(str, obj))
    return keys


def is_wandb_chart(cols: list[str]) -> bool:
    runs = [c for c in cols if " - " in c]
    return bool(runs) and len(runs) == len(cols) - 1


def detect_file(path: Path) -> str:
    """The format of regular file ``path`` (the module docstring's rules)."""
    name, suffix = path.name.lower(), path.suffix.lower()
    head = _head(path)
    if "tfevents" in name or is_tfrecord(head):
        return "tensorboard"
    if name == "trainer_state.json":
        return "hf-trainer-state"
    if suffix in JSONL_SUFFIXES or (suffix not in TEXT_SUFFIXES
                                    and head.lstrip().startswith(b"{")):
        keys = jsonl_keys(head)
        if keys is None:
            return "json-document" if suffix == ".json" else "jsonl"
        if "log_history" in keys:
            return "hf-trainer-state"
        return "wandb-history" if columns.WANDB_STEP in keys else "jsonl"
    cols = header(path, head)
    low = {columns.norm(c) for c in cols}
    if {"tag", "value"} <= low:
        return "long-csv"
    if is_wandb_chart(cols):
        return "wandb-chart"
    if columns.WANDB_STEP in low:
        return "wandb-history"
    if (path.parent / "hparams.yaml").is_file() or (
            name == "metrics.csv" and {"epoch", "step"} <= low):
        return "lightning-csv"
    return "csv"


def hf_states(folder: Path) -> list[Path]:
    """The trainer states of an HF output folder: its own and its checkpoints'."""
    own = [folder / "trainer_state.json"] if (folder / "trainer_state.json").is_file() else []
    return own + sorted(p for p in folder.glob("checkpoint-*/trainer_state.json")
                        if p.is_file())


def detect_folder(folder: Path, names: set[str]) -> str | None:
    """The run format of ``folder`` (whose entries are ``names``), or None: not a run."""
    if "trainer_state.json" in names or (
            any(n.startswith("checkpoint-") for n in names) and hf_states(folder)):
        return "hf-trainer-state"
    if "meta.yaml" in names and (folder / "metrics").is_dir():
        return "mlflow"
    if L.METRICS in names and names & {L.CONFIG_JSON, L.META_JSON}:
        return "spikebench"
    if "metrics.csv" in names and "hparams.yaml" in names:
        return "lightning-csv"
    if any("tfevents" in n for n in names):
        return "tensorboard"
    return None
