"""What a trial leaves in the storage, so a report needs only the storage URL.

When a trial ends, its folder is read once and written to the trial's system attributes:

- ``spikebench:trial``: its ``trial.json``, the host and folder its full logs stayed in (or
  the artifact that holds them), and its seeds;
- ``spikebench:seed:<k>``: the seed's ``summary.json`` and ``meta.json``, and its curves
  (:data:`CURVES`) cut to at most ``2 * BUCKETS`` points per metric, keeping each bucket's
  lowest and highest value so a spike stays visible.

A value longer than :data:`CHUNK` characters is split over ``<key>:<i>`` parts (MySQL's
TEXT column holds 64 KiB). System attributes keep them out of the user attributes that
Optuna's dashboard shows and that sections read.
"""

from __future__ import annotations

import json
import math
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spikebench import metrics as M
from spikebench.spikes.logs import json_lines, parse_json
from spikebench.study import layout as L

PREFIX = "spikebench:"
TRIAL_KEY = PREFIX + "trial"
SEED_KEY = PREFIX + "seed:"
CURVES = (M.TRAIN_LOSS, M.VAL_LOSS, M.GRAD_NORM, M.LR)
BUCKETS = 500
CHUNK = 60_000


@dataclass
class StoredTrial:
    """A trial's records read back: ``job`` is its trial.json, ``seeds`` maps each seed to
    ``{"summary", "meta", "rows"}`` as a folder's files would give them."""

    job: dict[str, Any] | None
    where: dict[str, Any]
    seeds: dict[int, dict[str, Any]] = field(default_factory=dict)


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def thin(points: list[tuple[int, float]], buckets: int = BUCKETS) -> list[list[float]]:
    """At most ``2 * buckets`` points: each bucket's lowest and highest, in step order."""
    if len(points) <= 2 * buckets:
        return [[s, v] for s, v in points]
    size = math.ceil(len(points) / buckets)
    out = []
    for i in range(0, len(points), size):
        part = points[i:i + size]
        lo, hi = min(part, key=lambda p: p[1]), max(part, key=lambda p: p[1])
        out += [[s, v] for s, v in sorted({lo, hi})]
    return out


def _read(path: Path) -> Any:
    try:
        return parse_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # damaged: the report notes what is missing


def _curves(log: Path) -> dict[str, list[list[float]]]:
    series: dict[str, list[tuple[int, float]]] = {k: [] for k in CURVES}
    try:
        for _, row, _ in json_lines(log):
            if not isinstance(row, dict) or not _number(row.get(M.STEP)):
                continue
            for k in CURVES:
                if _number(row.get(k)):
                    series[k].append((int(row[M.STEP]), float(row[k])))
    except OSError:
        pass
    return {k: thin(v) for k, v in series.items() if v}


def build(trial_dir: Path, full_logs: dict[int, str] | None = None) -> dict[str, Any]:
    """The records of the trial in ``trial_dir``, by attribute name (not yet chunked).
    ``full_logs``: where each seed's full folder was put (an artifact), if anywhere."""
    seeds = {}
    for d in L.seed_dirs(trial_dir):
        log = d / L.METRICS if (d / L.METRICS).is_file() else d / L.PARTIAL
        seeds[L.seed_number(d)] = {"summary": _read(d / L.SUMMARY_JSON),
                                   "meta": _read(d / L.META_JSON), "curves": _curves(log)}
    where = {"host": socket.gethostname(), "dir": str(trial_dir.resolve()),
             "full_logs": {str(k): v for k, v in (full_logs or {}).items()}}
    out: dict[str, Any] = {TRIAL_KEY: {"job": _read(trial_dir / L.TRIAL_JSON), "where": where,
                                       "seeds": sorted(seeds)}}
    for k, rec in seeds.items():
        out[f"{SEED_KEY}{k}"] = rec
    return out


def chunked(records: dict[str, Any]) -> dict[str, Any]:
    """Each record as one attribute, or as ``{"chunks": n}`` plus ``<key>:<i>`` strings."""
    out: dict[str, Any] = {}
    for key, value in records.items():
        text = json.dumps(value, allow_nan=False, default=str)
        if len(text) <= CHUNK:
            out[key] = value
            continue
        parts = [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)]
        out[key] = {"chunks": len(parts)}
        out.update({f"{key}:{i}": p for i, p in enumerate(parts)})
    return out


def _finite(value: Any) -> Any:
    """JSON-safe: non-finite numbers (a diverged run's NaN loss) become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def attributes(trial_dir: Path, full_logs: dict[int, str] | None = None) -> dict[str, Any]:
    """The system attributes that hold the records of ``trial_dir``, JSON-safe, chunked."""
    return chunked(_finite(build(trial_dir, full_logs)))


def store(storage: Any, trial_id: int, trial_dir: Path,
          full_logs: dict[int, str] | None = None) -> None:
    """Write the records of ``trial_dir`` to the trial ``trial_id`` of ``storage``."""
    for key, value in attributes(trial_dir, full_logs).items():
        storage.set_trial_system_attr(trial_id, key, value)


def _get(attrs: dict[str, Any], key: str) -> Any:
    value = attrs.get(key)
    if isinstance(value, dict) and set(value) == {"chunks"} and isinstance(value["chunks"], int):
        parts = [attrs.get(f"{key}:{i}") for i in range(value["chunks"])]
        if not all(isinstance(p, str) for p in parts):
            return None
        try:
            return parse_json("".join(parts))
        except ValueError:
            return None
    return value


def _rows(curves: Any) -> list[dict[str, Any]]:
    """Metric rows, one per step, from stored curves (as a folder's metrics.jsonl gives)."""
    by_step: dict[int, dict[str, Any]] = {}
    for k, points in (curves.items() if isinstance(curves, dict) else ()):
        for p in points if isinstance(points, list) else ():
            if isinstance(p, list) and len(p) == 2 and _number(p[0]) and _number(p[1]):
                by_step.setdefault(int(p[0]), {M.STEP: int(p[0])})[k] = p[1]
    return [by_step[s] for s in sorted(by_step)]


def load(system_attrs: dict[str, Any]) -> StoredTrial | None:
    """A trial's records from its system attributes; None if it left none."""
    head = _get(system_attrs, TRIAL_KEY)
    if not isinstance(head, dict):
        return None
    seeds = {}
    for k in head.get("seeds") or []:
        rec = _get(system_attrs, f"{SEED_KEY}{k}")
        if isinstance(k, int) and isinstance(rec, dict):
            seeds[k] = {"summary": rec.get("summary"), "meta": rec.get("meta"),
                        "rows": _rows(rec.get("curves"))}
    job = head.get("job")
    where = head.get("where")
    return StoredTrial(job=job if isinstance(job, dict) else None,
                       where=where if isinstance(where, dict) else {}, seeds=seeds)
