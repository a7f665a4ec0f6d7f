"""A file or a folder of runs -> its runs, each under a unique, readable name.

A file is read in the format :func:`.detect.detect_file` finds (one run, or each run of a
W&B chart export or a long-format CSV with a run column). A folder is walked top-down, in
name order, not following links to folders and skipping hidden ones (``.git``,
MLflow's ``.trash``):

- a run folder (:func:`.detect.detect_folder`: an HF output folder, an MLflow run, a
  spikebench run, a Lightning version folder) is one run. Its subfolders are its own (an
  HF output folder's ``checkpoint-*`` states and TensorBoard ``runs/`` are the same run
  again, an MLflow run's artifacts, a spikebench run's trainer log) and are named as
  skipped where they hold logs, except an HF output folder's other subfolders, which are
  walked on. Other logs beside it are runs of their own (a ``trainer_state.json`` among
  other logs is one run of several), except beside a spikebench run (its trainer's own
  log, read as its ``metrics.jsonl``: skipped, and named);
- a folder with TensorBoard event files is one run (several where its files overlap as
  two runs would: :func:`.tensorboard.merge`), less the hparams-only subfolders
  ``add_hparams`` writes, which it takes its parameters from; its other subfolders are
  walked on;
- any other ``.csv``/``.tsv``/``.jsonl``/``.ndjson`` file is read as a file; one with no
  step or loss column at all (a results table) is skipped, and named in ``skipped``.

Names are paths relative to the folder given (``lightning_logs/version_0``), ``<file>:<run>``
for the runs of a multi-run file, ``<experiment>/<run name>`` for MLflow; unprintable
characters are escaped, and a name that repeats gets `` (2)``, `` (3)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from spikebench.errors import UserError
from spikebench.runs import hf, lightning, long_csv, mlflow, plain, tensorboard, wandb
from spikebench.runs.columns import MissingColumn
from spikebench.runs.detect import detect_file, detect_folder
from spikebench.runs.model import RunLog
from spikebench.runs.text import is_dir
from spikebench.study import layout as L

LOG_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson")
ONE_RUN_FOLDERS = ("hf-trainer-state", "mlflow", "spikebench", "lightning-csv")


@dataclass
class Found:
    runs: list[RunLog]
    single: bool  # the path given is one run (a file, or a run folder): shown in full
    skipped: list[str] = field(default_factory=list)  # "<path> (why)", files not read


def _printable(name: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def read_file(p: Path, *, name: str, prefix: str = "", **opts) -> list[RunLog]:
    """The runs of one file (``prefix``: what names its runs where it holds several)."""
    fmt = detect_file(p)
    if fmt == "tensorboard":
        return tensorboard.read(p, name=name, **opts)[0]
    if fmt == "hf-trainer-state":
        return [hf.read(p, name=name, **opts)]
    if fmt == "json-document":
        from spikebench.runs.meta import read_json

        doc = read_json(p)
        if isinstance(doc, dict) and "log_history" in doc:
            return [hf.read(p, name=name, **opts)]
        raise UserError(f"{p}: one JSON document, not JSON Lines (one object per line); the "
                        "JSON document read is HF's trainer_state.json (with 'log_history')")
    if fmt == "long-csv":
        return long_csv.read(p, name=name, prefix=prefix, **opts)
    if fmt == "wandb-chart":
        return wandb.read_chart(p, prefix=prefix, **opts)
    if fmt == "wandb-history":
        return [wandb.read_history(p, name=name, **opts)]
    if fmt == "lightning-csv":
        return [lightning.read(p, name=name, **opts)]
    if p.name == L.METRICS and detect_folder(p.parent, {
            n for n in (L.METRICS, L.CONFIG_JSON, L.META_JSON) if (p.parent / n).exists()
    }) == "spikebench":
        return [plain.read_spikebench(p.parent, name=name, **opts)]
    return [plain.read_file(p, name=name, fmt=fmt, **opts)]


def _own(fmt: str, d: Path, subdirs: list[Path], skipped: list[str]
         ) -> tuple[set[str], list[Path]]:
    """The entries of run folder ``d`` its run is read from, and the subfolders still to
    walk: an HF output folder's others (its checkpoints and TensorBoard ``runs/`` are the
    same run again); no other run folder's (an MLflow run's artifacts, a spikebench run's
    ``tb/``: its trainer's own log). Those not walked that hold logs are named in
    ``skipped``."""
    own = {L.METRICS, L.CONFIG_JSON, L.META_JSON, "metrics.csv", "trainer_state.json",
           "meta.yaml"}
    walk = []
    for sub in subdirs:
        if fmt == "hf-trainer-state" and not (sub.name.startswith("checkpoint-")
                                              or sub.name == "runs"):
            walk.append(sub)
            continue
        logs = _logs_below(sub)
        if not logs:
            continue
        why = ("a checkpoint of the same run" if fmt == "hf-trainer-state"
               and sub.name.startswith("checkpoint-") else
               "the HF run's own TensorBoard log: the same run" if fmt == "hf-trainer-state"
               else f"inside the {fmt} run {d.name!r}: its own files")
        skipped.append(f"{sub} ({len(logs)} log file(s), {why})")
    return own, walk


def _logs_below(folder: Path, limit: int = 10_000) -> list[Path]:
    out = []
    for i, p in enumerate(folder.rglob("*")):
        if i >= limit:
            break
        n = p.name.lower()
        if (n.endswith(LOG_SUFFIXES) or "tfevents" in n or n == "trainer_state.json") \
                and p.is_file():
            out.append(p)
    return out


def _read_folder(fmt: str, d: Path, name: str, **opts) -> RunLog:
    if fmt == "hf-trainer-state":
        return hf.read(d, name=name, **opts)
    if fmt == "mlflow":
        return mlflow.read(d, name=name, **opts)
    if fmt == "spikebench":
        return plain.read_spikebench(d, name=name, **opts)
    return lightning.read(d / "metrics.csv", name=name, **opts)


def discover(path: str | Path, *, step: str | None = None, metric: str | None = None,
             grad_metric: str | None = None, extra: dict[str, str] | None = None) -> Found:
    """Every run at ``path`` (a file or a folder, see the module docstring)."""
    root = Path(path)
    opts = {"step": step, "metric": metric, "grad_metric": grad_metric, "extra": extra}
    if not is_dir(root):
        runs = read_file(root, name=root.name, **opts)
        return _unique(Found(runs, single=len(runs) == 1))
    top = root.resolve().name or str(root)
    found = Found([], single=False)
    asked: list[tuple[Path, str, list[str]]] = []  # logs without the column a flag named
    stack = [root]
    while stack:
        d = stack.pop()
        rel = d.relative_to(root).as_posix()
        name = top if rel == "." else rel
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as e:
            found.skipped.append(f"{d} (cannot list it: {e.strerror or e})")
            continue
        fmt = detect_folder(d, {e.name for e in entries})
        subdirs = [Path(e.path) for e in entries
                   if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
        own: set[str] = set()  # entries the folder's run is read from
        if fmt in ONE_RUN_FOLDERS:
            if fmt == "mlflow" and mlflow.is_deleted(d):
                found.skipped.append(f"{d} (a deleted MLflow run)")
                continue
            if fmt == "mlflow":
                parent = "/".join(Path(rel).parts[:-2])
                name = (parent + "/" if parent else "") + mlflow.run_name(d)
            found.runs.append(_read_folder(fmt, d, name, **opts))
            found.single = d == root
            own, subdirs = _own(fmt, d, subdirs, found.skipped)
        elif any(tensorboard.is_event_file(e.name) for e in entries):
            runs, claimed = tensorboard.read(d, name=name, **opts)
            found.runs += runs
            found.single = d == root and len(runs) == 1
            subdirs = [s for s in subdirs if s not in claimed]
            own = {e.name for e in entries if tensorboard.is_event_file(e.name)}
        if fmt is None and "hparams.yaml" in {e.name for e in entries} and not any(
                e.name.lower().endswith(LOG_SUFFIXES) or "tfevents" in e.name for e in entries):
            found.skipped.append(f"{d} (hparams.yaml and no log: a Lightning version folder "
                                 "without its metrics.csv?)")
        for e in entries:
            if e.name.startswith(".") or e.name in own or not (
                    e.name.lower().endswith(LOG_SUFFIXES) or tensorboard.is_event_file(e.name)):
                continue
            p = Path(e.path)
            if not e.is_file():  # a folder, a FIFO, a device, a dangling link
                if not e.is_dir():
                    found.skipped.append(f"{p} (not a regular file)")
                continue
            if fmt == "spikebench":  # a command trial's own log, scored into metrics.jsonl
                found.skipped.append(f"{p} (the log of the spikebench run beside it, read as "
                                     "its metrics.jsonl)")
                continue
            file_name = p.relative_to(root).as_posix()
            try:
                found.runs += read_file(p, name=file_name, prefix=file_name + ":", **opts)
            except MissingColumn as err:  # the short reason: "no step column"
                why = str(err).removeprefix(f"{p}: ").split(" (")[0]
                tail = ": not a training log"
                if err.name is not None:  # the column a flag named: the flag is the cause
                    asked.append((p, why, err.found))
                    tail = ""
                elif "reads as one column" in str(err):  # a ';'-separated CSV
                    tail = ": its header reads as one column (';' separates no columns)"
                found.skipped.append(f"{p} ({why}{tail})")
        stack.extend(reversed(subdirs))
    if not found.runs and asked:
        p, why, cols = asked[0]
        shown = ", ".join(map(repr, cols[:12])) + (", ..." if len(cols) > 12 else "")
        raise UserError(f"{why} in any of the {len(asked)} log(s) under {root} (the columns "
                        f"of {p} it could name: {shown or 'none'})")
    if not found.runs:
        raise UserError(f"{root}: is a directory with no training runs in it (looked for "
                        "TensorBoard event files, HF trainer states, Lightning, MLflow and "
                        "spikebench run folders, CSV and JSONL logs"
                        + (f"; skipped {len(found.skipped)} file(s): {found.skipped[0]}"
                           if found.skipped else "") + ")")
    found.single = found.single and len(found.runs) == 1
    found.runs.sort(key=lambda r: r.name)  # the walk's order is by folder, an MLflow run's an id
    return _unique(found)


def _unique(found: Found) -> Found:
    seen: dict[str, int] = {}
    for run in found.runs:
        name = _printable(run.name)
        seen[name] = seen.get(name, 0) + 1
        run.name = name if seen[name] == 1 else f"{name} ({seen[name]})"
    return found
