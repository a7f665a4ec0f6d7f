"""TensorBoard event files (``events.out.tfevents.*``), read by TensorBoard's own
``EventAccumulator``: no protobuf is parsed here.

A run is one event file, or a folder's event files together, as TensorBoard shows them: a
resumed run writes a new file beside the old, and the steps the restart orphaned (the old
file's from the new file's first step on) are dropped, which the run's note says. Files
whose steps overlap otherwise (the later starts at or before the earlier's first step,
with other values: two runs written to one folder) are never merged: each file is a run
of its own, named ``<folder>/<file>``, and the note says why. Scalars are those of ``add_scalar`` (``simple_value``) and TF2-style scalar
tensors. Hyperparameters come from the hparams plugin (``add_hparams``), in the run's own
files or in the subfolder ``SummaryWriter.add_hparams`` writes them to: such a subfolder,
holding hparams and no loss, belongs to the run above it and is not a run of its own; and
from a Lightning ``hparams.yaml`` beside the events. A ``seed`` among them is the run's
seed.

TensorBoard reads a damaged or cut record as the end of its file (a live run's last
record is often half-written); so does this reader.
"""

from __future__ import annotations

import logging
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spikebench.errors import UserError
from spikebench.runs import columns, meta
from spikebench.runs.model import RunLog
from spikebench.runs.table import build, flatten, plain_value, seed_of, series_table

FORMAT = "tensorboard"
INSTALL = "pip install 'spikebench[tensorboard]'"


def is_event_file(name: str) -> bool:
    return "tfevents" in name


def _modules():
    try:
        from tensorboard.backend.event_processing import event_accumulator
        from tensorboard.plugins.hparams import plugin_data_pb2
        from tensorboard.util import tensor_util
    except ImportError:
        raise UserError(f"reading TensorBoard event files needs tensorboard: {INSTALL}"
                        ) from None
    return event_accumulator, plugin_data_pb2, tensor_util


# Event files whose reading stopped at a record failing its checksum (damage inside a
# record, which the framing check of damage() cannot see): path -> where TensorBoard said.
_FAILED_CHECKSUM: dict[str, str] = {}


class _Checksums(logging.Handler):
    """Keeps what TensorBoard says (at debug level only) when a record fails its checksum:
    it reads that as the end of the file, and the run would end early unsaid."""

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text.startswith("Truncated record in ") and "crc" in text:
            _FAILED_CHECKSUM[text.removeprefix("Truncated record in ").split(" (")[0]] = text


@contextmanager
def _quiet():
    """TensorBoard logs what it skips (out-of-order steps it purges, cut records) as
    warnings, which would print under the command's one line: kept from printing, and a
    failed checksum noted (see :func:`damage`)."""
    log = logging.getLogger("tensorboard")
    level, propagate, handler = log.level, log.propagate, _Checksums()
    log.setLevel(logging.DEBUG)
    log.propagate = False
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate


def load(path: Path) -> tuple[dict[str, list[tuple[int, float]]], dict[str, Any]]:
    """The scalar series (tag -> [(step, value)]) and the hparams of an event file, or of
    a folder's event files."""
    if path.is_file() and not is_event_file(path.name):
        # TensorBoard takes a file for events by its name only: a renamed event file
        # (known by its content, see .detect) is read through a link so named.
        with tempfile.TemporaryDirectory() as tmp:
            link = Path(tmp) / "events.out.tfevents.renamed"
            link.symlink_to(path.resolve())
            return _load(link, path)
    return _load(path, path)


def _load(path: Path, where: Path) -> tuple[dict[str, list[tuple[int, float]]], dict[str, Any]]:
    ea, plugin_data_pb2, tensor_util = _modules()
    keep = {ea.SCALARS: 0, ea.TENSORS: 0, ea.IMAGES: 1, ea.AUDIO: 1, ea.HISTOGRAMS: 1,
            ea.COMPRESSED_HISTOGRAMS: 1}  # 0: every value of a tag; images: not wanted
    try:
        with _quiet():
            acc = ea.EventAccumulator(str(path), size_guidance=keep)
            acc.Reload()
            tags = acc.Tags()
            series = {t: [(int(e.step), float(e.value)) for e in acc.Scalars(t)]
                      for t in tags.get(ea.SCALARS, [])}
            for t in tags.get(ea.TENSORS, []):
                if acc.SummaryMetadata(t).plugin_data.plugin_name != "scalars":
                    continue
                points = [(int(e.step), tensor_util.make_ndarray(e.tensor_proto))
                          for e in acc.Tensors(t)]
                series[t] = [(s, float(a.reshape(()))) for s, a in points if a.size == 1]
            try:
                content = acc.PluginTagToContent("hparams")
            except KeyError:
                content = {}
            hparams: dict[str, Any] = {}
            for blob in content.values():
                data = plugin_data_pb2.HParamsPluginData.FromString(blob)
                if data.HasField("session_start_info"):
                    for k, v in data.session_start_info.hparams.items():
                        kind = v.WhichOneof("kind")
                        hparams[k] = (None if kind in (None, "null_value")
                                      else plain_value(getattr(v, kind)))
    except UserError:
        raise
    except Exception as e:  # TensorBoard's and protobuf's errors vary by version
        why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise UserError(f"{where}: cannot read as TensorBoard events ({why})") from None
    return series, hparams


def _event_folders(folder: Path) -> list[Path]:
    try:
        subs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()
                      and not p.name.startswith("."))
    except OSError:
        return []
    return [p for p in subs if any(is_event_file(n) for n in os.listdir(p))]


def merge(files: list[tuple[str, dict[str, list[tuple[int, float]]]]]
          ) -> tuple[dict[str, list[tuple[int, float]]] | None, str]:
    """Event files' series (in the order written) as one run's, and a note; None where
    two files overlap as two runs would (module docstring)."""
    merged: dict[str, dict[int, float]] = {}
    notes = []
    for name, series in files:
        steps = [s for points in series.values() for s, _ in points]
        if not steps:
            continue
        have = [s for points in merged.values() for s in points]
        first = min(steps)
        if have and first <= max(have):
            same = all(merged.get(tag, {}).get(s, v) == v
                       for tag, points in series.items() for s, v in points)
            if not same and first <= min(have):
                return None, (f"{name} logs steps {first} to {max(steps)} again with other "
                              "values: a second run in the folder")
            if not same:
                for points in merged.values():
                    for s in [s for s in points if s >= first]:
                        del points[s]
                notes.append(f"{name} resumes at step {first}: the earlier file's steps "
                             f"{first} to {max(have)} dropped, as TensorBoard shows them")
        for tag, points in series.items():
            merged.setdefault(tag, {}).update(points)
    return {tag: sorted(points.items()) for tag, points in merged.items()}, "; ".join(notes)


def damage(path: Path) -> str:
    """Where an event file stops being a sequence of whole records (TensorBoard reads the
    rest as the end of the file), or "" where it is whole. Only the framing is checked
    (each record's 8-byte length) here; a record failing its checksum is known from the
    reading (:class:`_Checksums`)."""
    failed = _FAILED_CHECKSUM.pop(str(path), None)  # known from the reading just done
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            at = 0
            while at < size:
                head = f.read(8)
                n = int.from_bytes(head, "little") if len(head) == 8 else -1
                if n < 0 or at + 16 + n > size:
                    return (f"{path.name} is cut or damaged at byte {at:,} of {size:,}: read "
                            "to the last whole record")
                at += 16 + n
                f.seek(at)
    except OSError:
        return ""
    if failed:
        return (f"{path.name} is damaged: a record fails its checksum; read to the last "
                "whole record before it")
    return ""


def _event_files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if is_event_file(p.name) and p.is_file())
    except OSError:
        return []


def read(path: Path, *, name: str, step: str | None = None, metric: str | None = None,
         grad_metric: str | None = None,
         extra: dict[str, str] | None = None) -> tuple[list[RunLog], list[Path]]:
    """The runs in event file or folder ``path`` (one, unless the folder's files overlap as
    two runs would), and the subfolders it took hparams from (not runs of their own)."""
    files = _event_files(path) if path.is_dir() else []
    loaded: list[tuple[str, dict, dict]] = []
    if len(files) > 1:
        loaded = [(f.name, *load(f)) for f in files]
        series, note = merge([(n, s) for n, s, _ in loaded])
        hparams = {k: v for _, _, h in loaded for k, v in h.items()}
    else:
        (series, hparams), note = load(path), ""
    cut = "; ".join(filter(None, map(damage, files or ([path] if path.is_file() else
                                                          _event_files(path)))))
    note = "; ".join(filter(None, (note, cut)))
    claimed = []
    if path.is_dir():
        for sub in _event_folders(path):
            sub_series, sub_hparams = load(sub)
            loss = columns.find(list(sub_series), (metric,) if metric else columns.LOSS_NAMES)
            if sub_hparams and not loss:
                hparams = {**sub_hparams, **hparams}
                claimed.append(sub)
        if (path / "hparams.yaml").is_file():  # Lightning's TensorBoardLogger writes one too
            yaml_params = meta.table(path / "hparams.yaml", meta.read_yaml(path / "hparams.yaml"))
            hparams = {**flatten(yaml_params), **hparams}
    opts = {"step": step, "metric": metric, "grad_metric": grad_metric, "extra": extra}
    if series is None:  # two runs in one folder: each file its own
        runs = []
        for f, (_, s, h) in zip(files, loaded, strict=True):
            runs.append(_run(f, s, {**hparams, **h}, name=f"{name}/{f.name}",
                             note=f"one of {len(files)} event files in {path.name} whose "
                             f"steps overlap with other values ({note}): read apart", **opts))
        return runs, claimed
    return [_run(path, series, hparams, name=name, note=note, **opts)], claimed


def _run(path: Path, series: dict, hparams: dict[str, Any], *, name: str, note: str,
         **opts: Any) -> RunLog:
    if not series:
        raise UserError(f"{path}: no scalars in its TensorBoard event files")
    cols, cells = series_table(series)
    return build(path, cols, cells, name=name, fmt=FORMAT, what="tag", params=hparams,
                 seed=seed_of(hparams), note=note, **opts)
