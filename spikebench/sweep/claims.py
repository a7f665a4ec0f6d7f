"""Seed claims: which process trains which seed of a trial.

A trial's process trains its seeds in order; once no trial is left to start, a worker that
would sit idle starts a *helper* on the same trial folder, which trains seeds from the end
of the list. Each seed is claimed first by creating ``seed-<n>.claim`` (exclusively, so
two processes never train one seed), holding the claimer's pid. A seed whose claimer died
before its summary was written is taken over by the trial's process, from its checkpoints
when it has them. The claims sit beside the seed folders, so a retry of the trial, which
copies seed folders only, starts with none.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from spikebench.runio import atomic_write_text
from spikebench.study import layout as L


def helpable(seeds: list[int]) -> list[int]:
    """The seeds a helper may take: all but the first, the trial process's own, which
    reports to the pruner."""
    return seeds[1:]


def _path(trial_dir: Path, seed: int) -> Path:
    return trial_dir / (L.seed_name(seed) + ".claim")


def claim(trial_dir: Path, seed: int) -> bool:
    """Claim ``seed`` for this process; False if another process has."""
    try:
        fd = os.open(_path(trial_dir, seed), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)
    return True


def claimer_alive(trial_dir: Path, seed: int) -> bool:
    """The process that claimed ``seed`` still runs (an unreadable claim counts as one
    being written, so alive)."""
    try:
        pid = int(_path(trial_dir, seed).read_text() or "0")
    except (OSError, ValueError):
        return True
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it runs, as another user
    return True


def take_over(trial_dir: Path, seed: int) -> None:
    """Make this process the claimer of ``seed`` (its claimer died)."""
    atomic_write_text(_path(trial_dir, seed), str(os.getpid()))


def unclaimed(trial_dir: Path, seeds: Iterable[int]) -> list[int]:
    """The seeds of ``seeds`` that no process has claimed yet."""
    return [s for s in seeds if not _path(trial_dir, s).exists()]
