"""MLflow's file store (``mlruns/``), read as the plain files it is; MLflow is not needed.

``mlruns/<experiment id>/meta.yaml`` names the experiment; each run is
``mlruns/<experiment id>/<run id>/`` with ``meta.yaml`` (``run_name``,
``lifecycle_stage``), ``metrics/<key>`` (one line per logged value:
``<timestamp ms> <value> <step>``; a key with ``/`` is a subfolder), ``params/<key>`` (the
value as text) and ``tags/`` (``mlflow.runName``). A run is named
``<experiment name>/<run name>``. Deleted runs (``lifecycle_stage: deleted``, kept until
``mlflow gc``) are skipped, as MLflow's UI hides them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spikebench.errors import UserError
from spikebench.runs import meta
from spikebench.runs.model import RunLog
from spikebench.runs.table import build, scalar_text, seed_of, series_table
from spikebench.spikes.logs import MAX_STEP

FORMAT = "mlflow"
MAX_VALUE_FILE = 1 << 20  # a param or tag file holds one value


def _files(folder: Path) -> dict[str, Path]:
    """Files below ``folder`` by key (their path relative to it, ``/``-separated)."""
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def _value(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_VALUE_FILE:
            raise UserError(f"{path}: over {MAX_VALUE_FILE >> 10} KiB, not an MLflow value")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None


def _metric(path: Path) -> list[tuple[int, float]]:
    points = []
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) not in (2, 3):
                    raise UserError(f"{path}: line {n}: expected '<timestamp> <value> <step>', "
                                    f"got {line.strip()[:80]!r}")
                try:
                    value = float(fields[1])
                    step = int(fields[2]) if len(fields) == 3 else 0  # MLflow < 1.0: no step
                except ValueError:
                    raise UserError(f"{path}: line {n}: {line.strip()[:80]!r} is not "
                                    "'<timestamp> <value> <step>' numbers") from None
                if not 0 <= step <= MAX_STEP:
                    raise UserError(f"{path}: line {n}: step {step} is out of range "
                                    "(allowed: 0 to 2**53 - 1)")
                points.append((step, value))
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    return points


def is_deleted(run: Path) -> bool:
    info = meta.table(run / "meta.yaml", meta.read_yaml(run / "meta.yaml"))
    return info.get("lifecycle_stage") == "deleted"


def run_name(run: Path) -> str:
    """``<experiment name>/<run name>`` from the two meta.yaml files and the run's tags."""
    info = meta.table(run / "meta.yaml", meta.read_yaml(run / "meta.yaml"))
    tag = run / "tags" / "mlflow.runName"
    name = info.get("run_name") or (_value(tag).strip() if tag.is_file() else "") \
        or info.get("run_id") or run.name
    exp = run.parent / "meta.yaml"
    exp_name = run.parent.name
    if exp.is_file():
        exp_name = meta.table(exp, meta.read_yaml(exp)).get("name") or exp_name
    return f"{exp_name}/{name}"


def read(run: Path, *, name: str, step: str | None = None, metric: str | None = None,
         grad_metric: str | None = None,
         extra: dict[str, str] | None = None) -> RunLog:
    series = {key: _metric(p) for key, p in _files(run / "metrics").items()}
    series = {k: v for k, v in series.items() if v}
    if not series:
        raise UserError(f"{run}: an MLflow run with no metric values (metrics/ is empty)")
    params: dict[str, Any] = {k: scalar_text(_value(p)) for k, p in _files(run / "params").items()}
    cols, cells = series_table(series)
    return build(run, cols, cells, name=name, fmt=FORMAT, step=step, metric=metric,
                 grad_metric=grad_metric, extra=extra, what="metric", params=params,
                 seed=seed_of(params))

