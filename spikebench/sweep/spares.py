"""Warm trial processes: each worker slot keeps one runner that has already imported torch.

A fresh process per trial keeps trials apart (no memory creep, a crash costs one trial),
but starting one and importing torch costs seconds that no worker trains in. So while a
trial runs, its slot's next process starts and waits (``runner --wait``); the next trial
hands it its folder on stdin. A spare is started with its slot's environment, so it is used
only by a trial with that environment (single-process trials: ``train.nproc`` = 1).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from spikebench.sweep.slots import Slot

_spares: dict[tuple[str, str], subprocess.Popen] = {}
_lock = threading.Lock()
_closed = [False]  # set by close() (an interrupt): no spare is handed out or started


def slot_env(slot: Slot, threads: int) -> dict[str, str]:
    return {**os.environ, **slot.env, "OMP_NUM_THREADS": str(threads),
            "SPIKEBENCH_PARENT_PID": str(os.getpid()), "PYTHONUNBUFFERED": "1"}


def _start(slot: Slot, trials_dir: Path) -> subprocess.Popen:
    # The trials folder in the command line names the sweep the process belongs to.
    return subprocess.Popen(
        [sys.executable, "-m", "spikebench.sweep.runner", "--wait", str(trials_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=slot_env(slot, slot.threads))


def take(slot: Slot, trials_dir: Path, trial_dir: Path,
         start_next: bool = True) -> subprocess.Popen | None:
    """The slot's waiting process, now running ``trial_dir`` (None if it has none or it
    died). With ``start_next``, a new one starts for the slot's next trial (the caller
    knows whether there will be one: a spare never used costs a torch import of CPU)."""
    key = (slot.name, str(trials_dir))
    with _lock:
        if _closed[0]:
            return None
        proc = _spares.pop(key, None)
        if start_next:
            _spares[key] = _start(slot, trials_dir)
    if proc is None or proc.poll() is not None:
        return None
    try:
        proc.stdin.write(f"{trial_dir}\n")
        proc.stdin.close()
    except OSError:  # it died just now
        proc.kill()
        return None
    return proc


def open_() -> None:
    """A sweep or worker starts: spares may be started again after an earlier close()."""
    with _lock:
        _closed[0] = False


def close() -> None:
    """Stop every waiting process (the sweep is over, or interrupted)."""
    with _lock:
        _closed[0] = True
        procs = list(_spares.values())
        _spares.clear()
    for p in procs:
        p.kill()
        p.wait()
