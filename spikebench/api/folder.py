"""A run's folder and endpoint: its name, a killed run's log kept aside, the Prometheus
sink of ``metrics_port``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from spikebench.study import layout as L
from spikebench.train.sinks import Sink

KILLED = L.PARTIAL + ".killed"  # a killed run's rows, kept aside by the next init


def keep_killed_rows(folder: Path) -> None:
    """A killed run's log (``metrics.jsonl.partial``) is moved aside to
    ``metrics.jsonl.partial.killed`` (numbered if one is there) rather than overwritten:
    a new run starts a fresh log, and :meth:`Run.load_state_dict` rewrites it from the
    checkpoint; the rows past the checkpoint stay in the kept file. Said on stderr."""
    partial = folder / L.PARTIAL
    if not partial.exists():
        return
    if partial.stat().st_size == 0:
        partial.unlink()
        return
    kept, n = folder / KILLED, 1
    while kept.exists():
        n += 1
        kept = folder / f"{KILLED}.{n}"
    os.replace(partial, kept)
    sys.stderr.write(f"spikebench: run folder {folder}: a killed run's log was kept aside as "
                     f"{kept.name}; this run starts a new log\n")


def device_name() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() and torch.cuda.is_initialized() else "cpu"


def new_dir(out: Path, seed: int) -> Path:
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-s{seed}"
    path, n = out / name, 1
    while path.exists():
        n += 1
        path = out / f"{name}-{n}"
    return path


def prometheus(port: int) -> Sink:
    from spikebench.live.exporter import Exporter
    from spikebench.live.server import require_client, serve
    from spikebench.live.sink import PrometheusSink

    require_client(port)
    ex = Exporter()
    serve(ex.registry, port)
    return PrometheusSink(ex)
